"""``/docs``: Swagger UI from the ``fastapi-swagger`` package's copy of its assets, served by the API itself, so
the page works offline and behind a firewall (FastAPI's default loads them from a CDN)."""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter, Request, Response
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

ASSETS = {"swagger-ui-bundle.js": "application/javascript", "swagger-ui.css": "text/css",
          "favicon-32x32.png": "image/png"}
router = APIRouter(include_in_schema=False)


@cache
def _asset(name: str) -> bytes:
    return resources.files("fastapi_swagger.resources").joinpath(name).read_bytes()


@router.get("/docs")
async def docs(request: Request) -> HTMLResponse:
    root = request.scope.get("root_path", "").rstrip("/")
    return get_swagger_ui_html(openapi_url=f"{root}/openapi.json", title="Mneme API",
                               swagger_js_url=f"{root}/docs/assets/swagger-ui-bundle.js",
                               swagger_css_url=f"{root}/docs/assets/swagger-ui.css",
                               swagger_favicon_url=f"{root}/docs/assets/favicon-32x32.png",
                               swagger_ui_parameters={"persistAuthorization": True, "displayRequestDuration": True})


@router.get("/docs/assets/{name}")
async def asset(name: str) -> Response:
    if name not in ASSETS:
        return Response(status_code=404)
    return Response(_asset(name), media_type=ASSETS[name], headers={"Cache-Control": "public, max-age=86400"})
