"""Search folds letters as the docs say: accents away (é → e, å → a) and the letters Unicode does
not decompose spelled out (ø → o, æ → ae, ß → ss), in the index and in the query alike, so
``lordag`` finds "lørdag" — with the snippet shown as written. A trace file of the previous
schema (its index of unfolded text) is re-indexed when it is opened."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from podium.orchestrator import Fallback, Orchestrator
from podium.testing import ScriptedConductor, ScriptedWorker
from podium.trace.store import SCHEMA_VERSION, TraceStore

DANISH = "Kan vi mødes på lørdag til æblegrød hos Søren?"


def run(store: TraceStore, question: str, reply: str = "Ja, kl. 10.") -> str:
    orch = Orchestrator(
        [ScriptedWorker("w0", reply=reply)],
        ScriptedConductor(['model_id = [0]\nsubtasks = ["Svar."]\naccess_list = [[]]']),
        Fallback(0, "Answer."),
        traces=store,
    )
    return asyncio.run(orch.run(question)).id


@pytest.fixture
def store(tmp_path: Path) -> TraceStore:
    s = TraceStore(tmp_path / "t.sqlite3")
    run(s, DANISH, reply="Straße und Café: ŁÓDŹ")
    return s


@pytest.mark.parametrize(
    ("query", "word"),
    [
        ("lordag", "lørdag"),  # ø → o: the adoption trial's miss
        ("lørdag", "lørdag"),
        ("LØRDAG", "lørdag"),
        ("aeblegrod", "æblegrød"),  # æ → ae
        ("æblegrød", "æblegrød"),
        ("pa lordag", "lørdag"),  # å → a (å decomposes: a + ring)
        ("soren", "Søren"),
        ("sø*", "Søren"),  # a prefix, folded too
    ],
)
def test_plain_queries_fold_like_the_index(store: TraceStore, query: str, word: str) -> None:
    [hit] = store.search(query, fields=["question"])
    assert hit.snippet == DANISH  # as written, not folded
    assert word in [hit.snippet[a:b] for a, b in hit.highlights]


def test_other_letters_and_raw_fts_queries_fold_too(store: TraceStore) -> None:
    assert [h.field for h in store.search("strasse cafe lodz")] == ["answer"]
    [hit] = store.search("lordag OR nothing", raw=True)
    assert "lørdag" in [hit.snippet[a:b] for a, b in hit.highlights]
    assert store.search("lardag") == []  # folding, not fuzziness


def test_the_folding() -> None:
    from podium.trace.query import fold, fold_map, fts_query, restore_snippet

    assert (
        fold("Lørdag Æblegrød Straße café naïve ﬁne ÅRHUS Łódź ðþ")
        == "Lordag AEblegrod Strasse cafe naive fine ARHUS Lodz dth"
    )
    assert fold("plain ascii") == "plain ascii"
    folded, source = fold_map("æøx")
    assert folded == "aeox" and source == (0, 0, 1, 2)  # each folded character knows where it came from
    assert fts_query("lørdag") == '"lordag"'
    # a snippet of the folded text goes back onto the original, highlights included
    assert restore_snippet("…pa lordag kl…", ((4, 10),), "Vi ses på lørdag kl. 10") == ("…på lørdag kl…", ((4, 10),))
    assert restore_snippet("aeble og grod", ((0, 5), (9, 13)), "æble og grød") == ("æble og grød", ((0, 4), (8, 12)))


def test_a_version_3_file_is_reindexed_when_opened(tmp_path: Path) -> None:
    """A trace file of schema 3 indexed 'lørdag' as written, so 'lordag' could never match; it is
    upgraded and its rows indexed again, folded, when it opens."""
    path = tmp_path / "v3.sqlite3"
    db = sqlite3.connect(path)
    db.executescript((Path(__file__).parent / "data" / "trace-schema-v3.sql").read_text(encoding="utf-8"))
    db.execute(
        "INSERT INTO requests (id, started_at, mode, pool, conductor, status, question, answer) "
        "VALUES ('ab12', '2026-11-29T00:00:00.000Z', 'run', 'p', 'c', 'ok', ?, 'svaret')",
        (DANISH,),
    )
    db.execute(
        "INSERT INTO search_text (request_id, field, location, text) VALUES ('ab12', 'question', '', ?)", (DANISH,)
    )
    db.commit()
    assert db.execute("SELECT count(*) FROM search_index WHERE search_index MATCH 'lordag'").fetchone() == (0,)
    db.close()
    store = TraceStore(path)
    [hit] = store.search("lordag")
    assert (hit.trace.id, hit.field, hit.snippet) == ("ab12", "question", DANISH)
    assert [h.field for h in store.search("svaret")] == ["answer"]  # every text indexed again, once
    assert len(store.search("lørdag")) == 1
    check = sqlite3.connect(path)
    assert check.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert check.execute("SELECT count(*) FROM search_text").fetchone() == (2,)
    check.execute("INSERT INTO search_index (search_index) VALUES ('integrity-check')")  # index = its content
    check.rollback()
    check.close()
    # and new requests are indexed folded as well
    run(store, "Hvornår åbner Nørrebro Bibliotek?")
    assert [h.trace.question for h in store.search("norrebro abner")] == ["Hvornår åbner Nørrebro Bibliotek?"]


def test_a_version_5_file_loses_its_per_row_index_trigger(tmp_path: Path) -> None:
    """Schema 5 filled the search index by a trigger per search_text row; from 6 index_texts
    fills it with one statement per batch. A v5 file's trigger must go when it opens, or every
    new text would be indexed twice (the integrity check below would fail)."""
    path = tmp_path / "v5.sqlite3"
    store = TraceStore(path)
    run(store, "Hvornår åbner Nørrebro Bibliotek?")
    store.close()
    db = sqlite3.connect(path)  # make it the version-5 file an older podium left
    db.execute(
        "CREATE TRIGGER search_text_insert AFTER INSERT ON search_text BEGIN "
        "INSERT INTO search_index (rowid, folded) VALUES (new.id, COALESCE(new.folded, new.text)); END"
    )
    db.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    store = TraceStore(path)
    run(store, "Lørdag lukker biblioteket tidligt")
    assert [h.trace.question for h in store.search("lordag")] == ["Lørdag lukker biblioteket tidligt"]
    assert len(store.search("norrebro")) == 1
    store.close()
    check = sqlite3.connect(path)
    triggers = "SELECT name FROM sqlite_master WHERE type = 'trigger'"
    assert [name for (name,) in check.execute(triggers)] == ["search_text_delete"]
    check.execute("INSERT INTO search_index (search_index) VALUES ('integrity-check')")  # index = its content
    check.close()
