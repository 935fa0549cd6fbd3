"""The episodic contract against the embedded SQLite adapter, one real file per test."""

import sqlite3

import pytest

from memory.episodic import sqlite as adapter
from memory.episodic.sqlite import SQLiteEpisodicStore
from memory.purposes import ANY
from tests.episodic_contract import EpisodicContract, FreshIds, T, rows, tok, unit


class TestSQLiteEpisodic(EpisodicContract):
    @pytest.fixture
    def store(self, tmp_path):
        return SQLiteEpisodicStore(tmp_path / "episodic.db")


class TestSQLiteEpisodicReadInChunks(EpisodicContract):
    """The same contract with a vector search reading two rows at a time (as a long-term user's thousands are
    read, ``SEARCH_CHUNK`` at a time): the best rows are found whichever chunk holds them."""

    @pytest.fixture
    def store(self, tmp_path, monkeypatch):
        monkeypatch.setattr(adapter, "SEARCH_CHUNK", 2)
        return SQLiteEpisodicStore(tmp_path / "episodic.db")


def test_a_file_written_before_purposes_opens_and_its_rows_serve_every_first_grant(tmp_path):
    path = tmp_path / "episodic.db"
    store = SQLiteEpisodicStore(path)
    ids = FreshIds()
    store.add([EpisodicContract.event(ids, "old", tokens=[tok("旧")])], rows(unit(1)), 0.9, 200)
    with sqlite3.connect(path) as conn:  # as the file was before the column existed
        conn.execute("ALTER TABLE events DROP COLUMN purposes")
        conn.execute("ALTER TABLE vectors DROP COLUMN purposes")
    reopened = SQLiteEpisodicStore(path)
    [event] = reopened.get(T, ids("u"), [ids("old")])
    assert event.purposes == [ANY]
    assert reopened.vector_search(T, ids("u"), unit(1), None, 5, purposes=["tutoring#1", ANY])
    assert reopened.keyword_search(T, ids("u"), [tok("旧")], None, 5, purposes=["tutoring#1", ANY])
    assert not reopened.vector_search(T, ids("u"), unit(1), None, 5, purposes=["tutoring#2"])
