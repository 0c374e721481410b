"""Read Vite's build manifest so Django can emit the hashed asset tags.

Vite writes ``frontend/dist/.vite/manifest.json`` mapping each entry
(``src/main.ts``) to its hashed output (``assets/main-1a2b3c.js``) and the CSS
and chunks it pulls in. Those paths are relative to ``frontend/dist``, which is
a STATICFILES_DIRS entry, so ``{% static path %}`` turns each into its URL (and,
under whitenoise's manifest storage, into the collected, re-hashed name).

The manifest is read from the build output, not from STATIC_ROOT, because
``collectstatic`` skips dot-directories such as ``.vite/``. It is cached by
modification time: a rebuild is picked up without a restart.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.templatetags.static import static

__all__ = ["DEFAULT_ENTRY", "FrontendNotBuilt", "ViteAssets", "entry_assets", "manifest_path"]

DEFAULT_ENTRY = "src/main.ts"

_cache_lock = threading.Lock()
_cache: dict[Path, tuple[float, dict[str, dict]]] = {}


class FrontendNotBuilt(Exception):
    """The dashboard cannot be served; ``hint`` says which command fixes it."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


@dataclass(frozen=True)
class ViteAssets:
    """Static paths, relative to ``frontend/dist``.

    The template passes ``script`` and ``styles`` through ``{% static %}``.
    ``preloads`` must instead be the URLs the browser will *import*: the entry
    imports its chunks by Vite's own (already content-hashed) names, which the
    manifest storage does not rewrite inside JavaScript, so preloading
    ``{% static chunk %}`` (Django's second hash) fetched three.js twice.
    """

    script: str
    styles: tuple[str, ...] = ()
    preloads: tuple[str, ...] = ()

    @property
    def preload_urls(self) -> tuple[str, ...]:
        return tuple(settings.STATIC_URL + path for path in self.preloads)


def manifest_path() -> Path:
    return Path(settings.VITE_MANIFEST)


def _load_manifest(path: Path) -> dict[str, dict]:
    try:
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        raise FrontendNotBuilt(
            f"The frontend has not been built: {path} is missing.",
            "cd frontend && npm ci && npm run build, then python manage.py collectstatic "
            "(bash scripts/demo does all of this)",
        ) from None
    with _cache_lock:
        cached = _cache.get(path)
        if cached and cached[0] == mtime:
            return cached[1]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FrontendNotBuilt(
            f"The frontend build manifest {path} is unreadable ({exc}).",
            "rebuild it: cd frontend && npm run build",
        ) from exc
    with _cache_lock:
        _cache[path] = (mtime, data)
    return data


def _imported_chunks(manifest: dict[str, dict], key: str, seen: set[str]) -> list[str]:
    """Chunks ``key`` imports statically, depth first, each once."""
    out: list[str] = []
    for dep in manifest.get(key, {}).get("imports", []):
        if dep in seen:
            continue
        seen.add(dep)
        out.extend(_imported_chunks(manifest, dep, seen))
        out.append(dep)
    return out


def entry_assets(entry: str = DEFAULT_ENTRY) -> ViteAssets:
    """The script, stylesheets and module preloads of one entry.

    Raises :class:`FrontendNotBuilt` if the build or ``collectstatic`` is missing,
    so the view can show what to run instead of a bare 500.
    """
    manifest = _load_manifest(manifest_path())
    chunk = manifest.get(entry)
    if not chunk or "file" not in chunk:
        raise FrontendNotBuilt(
            f"The frontend build has no entry {entry!r}.",
            "rebuild it: cd frontend && npm run build",
        )
    styles: list[str] = list(chunk.get("css", []))
    preloads: list[str] = []
    for dep in _imported_chunks(manifest, entry, {entry}):
        dep_chunk = manifest[dep]
        preloads.append(dep_chunk["file"])
        styles.extend(css for css in dep_chunk.get("css", []) if css not in styles)
    for path in (chunk["file"], *styles, *preloads):
        try:
            static(path)
        except ValueError as exc:  # whitenoise/Django manifest storage: not collected
            raise FrontendNotBuilt(
                f"The built asset {path} has not been collected ({exc}).",
                "python manage.py collectstatic --noinput",
            ) from exc
    return ViteAssets(script=chunk["file"], styles=tuple(styles), preloads=tuple(preloads))
