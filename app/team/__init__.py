"""For the team that runs it (issue 13): missed searches, feedback, sign-in and roles, drafts.

The web tier's part of the loop between people who hit errors and the few who curate entries.
"""
