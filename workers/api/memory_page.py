"""``/memory``: the memory page (记忆透明度), a person's view of what the agent believes about them — served by the
API from its own static files (``static/memory_page``: the page, and Preact + htm and Chart.js vendored from npm by
``web/memory-page/vendor.mjs``), so it needs no CDN. It opens on a memory-page link (``POST
/v1/users/{id}/page-link``) and talks to the API's own routes with it (``workers.api.deps``: that user's page,
nothing else)."""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter, Response
from fastapi.responses import HTMLResponse

TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html; charset=utf-8"}
ASSETS = ("app.js", "style.css", "vendor/preact-htm.module.js", "vendor/chart.umd.min.js")
#: the page loads only its own files and talks only to this API; the link's token never leaves it
POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' blob: data:; "
          "base-uri 'none'; frame-ancestors 'none'; form-action 'none'")
router = APIRouter(include_in_schema=False)


@cache
def _file(name: str) -> bytes:
    return resources.files("workers.api").joinpath("static", "memory_page", name).read_bytes()


@router.get("/memory")
async def page() -> HTMLResponse:
    return HTMLResponse(_file("index.html"), headers={"Content-Security-Policy": POLICY, "Cache-Control": "no-store",
                                                       "Referrer-Policy": "no-referrer"})


@router.get("/memory/assets/{name:path}")
async def asset(name: str) -> Response:
    if name not in ASSETS:
        return Response(status_code=404)
    return Response(_file(name), media_type=TYPES["." + name.rsplit(".", 1)[-1]],
                    headers={"Cache-Control": "public, max-age=3600", "X-Content-Type-Options": "nosniff"})
