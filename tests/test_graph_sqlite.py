"""The graph contract against the embedded SQLite adapter, one real file per test."""

import pytest

from memory.graph.sqlite import SQLiteGraphStore
from tests.graph_contract import GraphContract


class TestSQLiteGraph(GraphContract):
    @pytest.fixture
    def store(self, tmp_path):
        return SQLiteGraphStore(tmp_path / "graph.db")
