"""Cold archive on a local directory: ``file:///absolute/dir``; a key is a relative path under it.

- ``put`` writes a temporary file beside the target, fsyncs it, ``os.replace``s it over the target and
  fsyncs the directory: a reader sees the old file or the new, and a crash leaves one of them. A
  temporary file is named ``<target name>~<random>``: ``~`` is not a key character, so ``list`` never
  shows it, and ``delete_prefix`` removes it with its target's prefix — a put that crashed half-way must
  not keep an erased user's data.
- ``delete_prefix`` removes the files, then every directory it left empty (never the root). A ``put``
  racing it for the same directory recreates the directory and tries again.
- Files are created ``0600``: the archive holds users' data. A key cannot be both an object and a
  "directory" of other objects here (S3 allows it); such a ``put`` is a ``Conflict``.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

from memory.archive import KEY_CHARS, check_key, check_prefix
from memory.errors import ConfigurationError, Conflict, InvalidInput, NotFound, TransientError
from memory.files import private_dir
from memory.settings import Settings

_TEMP_MARK = "~"  # not a key character
_TEMP_NAME_CHARS = 200  # of the target's name, leaving room for the mark and mkstemp's random part
_PUT_ATTEMPTS = 5


@contextlib.contextmanager
def _boundary(what: str) -> Iterator[None]:
    """OS errors become Mneme's: permissions are configuration, the rest (full disk, I/O) transient."""
    try:
        yield
    except PermissionError as exc:
        raise ConfigurationError(f"archive {what}: {exc}") from exc
    except OSError as exc:
        raise TransientError(f"archive {what}: {exc}") from exc


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unless_missing(exc: OSError) -> None:
    """A walk of a directory that is not there lists nothing; any other error must not shorten a list."""
    if not isinstance(exc, FileNotFoundError | NotADirectoryError):
        raise exc


class LocalColdStore:
    def __init__(self, root: Path) -> None:
        if not root.is_absolute():
            raise ConfigurationError(f"archive directory must be absolute, got {str(root)!r}")
        self.root = root
        with _boundary("setup"):
            private_dir(root)

    @classmethod
    def from_url(cls, url: str, settings: Settings) -> LocalColdStore:
        parts = urlsplit(url)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
            raise ConfigurationError(f"expected file:///absolute/dir for the archive, got {url!r}")
        return cls(Path(unquote(parts.path)))

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def put(self, key: str, data: bytes) -> None:
        target = self._path(key)
        with _boundary(f"put {key!r}"):
            if target.is_dir():
                raise Conflict(f"archive key {key!r} is a prefix of other objects here")
            for attempt in range(_PUT_ATTEMPTS):
                try:
                    self._write(target, data)
                    return
                except FileNotFoundError:  # delete_prefix removed the directory meanwhile
                    if attempt == _PUT_ATTEMPTS - 1:
                        raise
                except (NotADirectoryError, FileExistsError, IsADirectoryError) as exc:
                    raise Conflict(f"archive key {key!r} collides with another object: {exc}") from exc

    def _write(self, target: Path, data: bytes) -> None:
        private_dir(target.parent)
        fd, temp = tempfile.mkstemp(prefix=target.name[:_TEMP_NAME_CHARS] + _TEMP_MARK, dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(temp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        _fsync_dir(target.parent)

    def get(self, key: str) -> bytes:
        path = self._path(key)
        with _boundary(f"get {key!r}"):
            try:
                return path.read_bytes()
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
                raise NotFound(f"no archived object {key!r}") from exc

    def list(self, prefix: str) -> builtins.list[str]:
        return sorted(key for key, temporary in self._files(check_prefix(prefix)) if not temporary)

    def _files(self, prefix: str) -> Iterator[tuple[str, bool]]:
        """(path relative to the root, is it a temporary file) for every file under the prefix."""
        start = self.root / prefix.rpartition("/")[0]  # only the deepest directory it names: "a/b/2024-" → a/b
        with _boundary(f"list {prefix!r}"):
            for directory, dirs, files in os.walk(start, onerror=_unless_missing):
                dirs.sort()
                relative = Path(directory).relative_to(self.root).as_posix()
                base = "" if relative == "." else relative + "/"
                for name in files:
                    if (base + name).startswith(prefix):
                        yield base + name, KEY_CHARS.fullmatch(name) is None

    def delete_prefix(self, prefix: str) -> int:
        if not check_prefix(prefix):
            raise InvalidInput("refusing to delete the whole archive: give a non-empty prefix")
        deleted = 0
        parents: set[Path] = set()
        with _boundary(f"delete {prefix!r}"):
            for name, temporary in builtins.list(self._files(prefix)):
                path = self.root / name
                try:
                    path.unlink()
                except FileNotFoundError:
                    continue
                deleted += not temporary
                parents.add(path.parent)
            for directory in sorted(parents, key=lambda p: len(p.parts), reverse=True):
                self._remove_empty(directory)
        return deleted

    def _remove_empty(self, directory: Path) -> None:
        while directory != self.root and self.root in directory.parents:
            try:
                directory.rmdir()
            except OSError:  # not empty (or already gone with a sibling): stop climbing
                if directory.exists():
                    return
            directory = directory.parent

    def ping(self) -> None:
        if not self.root.is_dir():
            raise TransientError(f"archive directory {str(self.root)!r} is missing")
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise ConfigurationError(f"archive directory {str(self.root)!r} is not writable")
