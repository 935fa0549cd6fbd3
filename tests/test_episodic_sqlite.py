"""The episodic contract against the embedded SQLite adapter, one real file per test."""

import pytest

from memory.episodic.sqlite import SQLiteEpisodicStore
from tests.episodic_contract import EpisodicContract


class TestSQLiteEpisodic(EpisodicContract):
    @pytest.fixture
    def store(self, tmp_path):
        return SQLiteEpisodicStore(tmp_path / "episodic.db")
