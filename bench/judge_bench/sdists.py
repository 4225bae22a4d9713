"""Fetch a project's pinned source distribution from PyPI (once, into a cache) and unpack it.

The file's URL comes from PyPI's JSON simple index (PEP 691, `https://pypi.org/simple/NAME/`), the
same index pip reads; the download must match the sha256 pinned in the project's YAML, so a changed
or substituted file is refused. A cached file with the right hash is used without any network.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

from hilbert.errors import UserError

from .cases import Project

INDEX = "https://pypi.org/simple/{name}/"
ACCEPT = "application/vnd.pypi.simple.v1+json"


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _download(url: str, timeout_s: float, headers: dict[str, str] | None = None) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "hilbert-bench", **(headers or {})})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        body: bytes = response.read()
        return body


def fetch_sdist(project: Project, cache: Path, timeout_s: float = 60.0, index: str = INDEX) -> Path:
    """The path of the project's sdist in `cache`, downloaded first if it is not there. `index` is the
    simple index's URL with `{name}` for the project (tests point it at a loopback server)."""
    path = cache / project.sdist
    if path.exists() and sha256_of(path) == project.sha256:
        return path
    label = f"{project.name} {project.version}"
    try:
        listing = json.loads(_download(index.format(name=project.name), timeout_s, {"Accept": ACCEPT}))
        urls = [f["url"] for f in listing.get("files", []) if f.get("filename") == project.sdist]
        if not urls:
            raise UserError(
                f"PyPI lists no file {project.sdist} for {label}",
                hint=f"check `sdist` in {project.folder / 'project.yaml'}",
            )
        body = _download(urls[0], timeout_s)
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise UserError(
            f"cannot download {project.sdist} from PyPI ({err})",
            hint=f"go online once, or put the file in the cache folder {cache} (--cache DIR)",
        ) from err
    digest = hashlib.sha256(body).hexdigest()
    if digest != project.sha256:
        raise UserError(
            f"{project.sdist} from PyPI has sha256 {digest}, not the pinned {project.sha256}",
            hint="the release changed on PyPI or the pin is wrong; do not update the pin blindly",
        )
    cache.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.part")  # concurrent runs: each its own file
    partial.write_bytes(body)
    partial.replace(path)
    return path


def unpack(sdist: Path, destination: Path) -> Path:
    """Unpack the sdist's single top-level folder into `destination` (created; must not exist)."""
    staging = destination.with_name(destination.name + ".unpack")
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(sdist) as archive:
        archive.extractall(staging, filter="data")
    tops = list(staging.iterdir())
    if len(tops) != 1 or not tops[0].is_dir():
        raise UserError(f"{sdist.name}: expected one top-level folder", hint="pin a regular sdist")
    tops[0].rename(destination)
    staging.rmdir()
    return destination
