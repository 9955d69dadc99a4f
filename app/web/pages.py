"""HTML pages (placeholder until the web UI lands)."""

from fastapi import APIRouter, FastAPI

router = APIRouter()


def mount_static(app: FastAPI) -> None:
    return None
