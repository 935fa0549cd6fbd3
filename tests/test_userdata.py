"""No store of user data can be forgotten: every Redis key family says which store erases, exports and
verifies it (or why it holds no user data). That each store really is erased, through every API that
takes user text, is tests/test_privacy.py's erasure test (it scans every byte Mneme keeps)."""

import inspect

from memory import userdata
from memory.mneme import Mneme
from memory.settings import Settings
from memory.state import keys


def _key_families() -> set[str]:
    """Every key builder and fixed key in ``memory.state.keys``."""
    names = set()
    for name, value in vars(keys).items():
        if name.startswith("_") or name in ("PREFIX", "ERASED_BY", "NO_USER_DATA"):
            continue
        if isinstance(value, str) and value.startswith(keys.PREFIX + ":"):
            names.add(name)
        elif inspect.isfunction(value) and value.__module__ == keys.__name__:
            names.add(name)
    return names


def test_every_key_family_is_erased_by_a_store_or_holds_no_user_data():
    families = _key_families()
    assert families >= {"session", "job", "feedback_pairs", "devices", "DEAD_LETTERS"}  # the scan sees them
    undeclared = families - set(keys.ERASED_BY) - set(keys.NO_USER_DATA)
    assert not undeclared, f"say in memory/state/keys.py how these are erased, or why they hold none: {undeclared}"
    assert not set(keys.ERASED_BY) & set(keys.NO_USER_DATA)
    assert not (set(keys.ERASED_BY) | set(keys.NO_USER_DATA)) - families  # no stale entries


def test_every_named_store_exists_and_the_key_goes_last(tmp_path):
    rt = Mneme(Settings(_env_file=None, redis_url="redis://127.0.0.1:1/0", data_dir=tmp_path))  # nothing opened
    found = rt.user_data()
    assert all(isinstance(s, userdata.UserData) for s in found)  # count, export, erase
    stores = [s.name for s in found]
    assert set(keys.ERASED_BY.values()) <= set(stores) and len(set(stores)) == len(stores)
    assert {"episodic_events", "graph_relations", "archive_objects", "keys"} <= set(stores)
    assert stores[-1] == "keys"  # destroyed last: what is sealed under it is deleted first
