// Pitfalls: the only hand-written script. Copy buttons, a growing search box, Ctrl+Enter to search.
// Everything works without it; htmx does the live parts.
(function () {
  "use strict";
  function copyText(text, button) {
    var done = function () {
      var old = button.textContent;
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = old; }, 1500);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { fallback(text); done(); });
    } else { fallback(text); done(); }
  }
  function fallback(text) { // plain-http team servers have no Clipboard API
    var t = document.createElement("textarea");
    t.value = text; t.setAttribute("readonly", ""); t.style.position = "fixed"; t.style.opacity = "0";
    document.body.appendChild(t); t.select();
    try { document.execCommand("copy"); } catch (e) { /* nothing more to try */ }
    document.body.removeChild(t);
  }
  function showButtons(root) {
    root.querySelectorAll("button.copy[hidden]").forEach(function (b) { b.hidden = false; });
  }
  document.addEventListener("click", function (ev) {
    var b = ev.target.closest("button.copy");
    if (!b) return;
    var el = document.querySelector(b.dataset.copy);
    if (!el) return;
    copyText(el.tagName === "A" ? el.href : el.textContent.replace(/\n$/, ""), b);
  });
  function grow(t) { // for browsers without CSS field-sizing
    if (CSS.supports && CSS.supports("field-sizing", "content")) return;
    t.style.height = "auto";
    t.style.height = Math.min(t.scrollHeight + 2, window.innerHeight * 0.6) + "px";
  }
  document.addEventListener("input", function (ev) { if (ev.target.id === "q") grow(ev.target); });
  document.addEventListener("keydown", function (ev) {
    if (ev.target.id === "q" && ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      ev.target.form.requestSubmit();
    }
  });
  document.addEventListener("DOMContentLoaded", function () {
    showButtons(document);
    var q = document.getElementById("q");
    if (q) grow(q);
    if (!window.htmx && document.querySelector("#run-panel[aria-busy=true]")) {
      // htmx did not load (blocked, or its CDN out of reach): follow the run as the no-script page does
      setTimeout(function () { location.reload(); }, 2000);
    }
  });
  document.addEventListener("htmx:afterSettle", function () { showButtons(document); });
})();
