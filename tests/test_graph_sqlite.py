"""The graph contract against the embedded SQLite adapter, one real file per test."""

import sqlite3

import pytest

from memory.graph import MergeMode
from memory.graph.sqlite import SQLiteGraphStore
from memory.purposes import ANY
from tests.graph_contract import FreshIds, GraphContract


class TestSQLiteGraph(GraphContract):
    @pytest.fixture
    def store(self, tmp_path):
        return SQLiteGraphStore(tmp_path / "graph.db")


def test_a_file_written_before_purposes_opens_and_its_evidence_serves_every_first_grant(tmp_path):
    path = tmp_path / "graph.db"
    ids = FreshIds()
    key = GraphContract.key(ids, "物理")
    SQLiteGraphStore(path).merge(key, GraphContract.ev(ids, "e1"), MergeMode.blend)
    with sqlite3.connect(path) as conn:  # as the file was before the column existed
        conn.execute("ALTER TABLE evidence DROP COLUMN purposes")
    [row] = SQLiteGraphStore(path).evidence([GraphContract.rel_id(key)])
    assert row.purposes == [ANY]
