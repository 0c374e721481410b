"""Transformer shapes: :class:`ModelSpec`, the catalogue :data:`MODELS`, parsing.

A decoder-only transformer is l layers of attention + MLP on a hidden size h
with a heads (GQA: kv_heads ≤ heads key/value heads of size h/a), an MLP of
width ``ffn`` (GeLU: two matrices; SwiGLU: three — Shazeer 2020, "GLU
Variants Improve Transformer"), a vocabulary V and a sequence length s.
Mixture of experts (Fedus et al. 2022, Switch Transformers; Jiang et al. 2024,
Mixtral): every ``moe_every``-th MLP is ``experts`` copies, each token routed
to ``top_k`` of them, each expert taking at most capacity_factor × its even
share of tokens.

DeepSeekMoE (Dai et al. 2024, DeepSeekMoE, §3.2; DeepSeek-AI 2024, DeepSeek-V3
Technical Report, §2.1.2) adds ``shared_experts`` that every token runs: a
dense MLP of width shared_experts × ``shared_ffn`` on each MoE layer; its first
``first_dense`` layers keep a dense MLP of width ``dense_ffn``. Multi-head latent
attention (DeepSeek-V3 report, arXiv 2412.19437, §2.1.1) replaces Q, K, V and the
output by five projections through low-rank latents
(:meth:`ModelSpec.attention_projections`); ``routing_skew`` (max / mean routed
tokens over the EP ranks) makes the slowest rank's experts the layer's.

Parameters (weights only, biases and norms included as vectors):

    per layer   = h·(h + 2·kv·h/a) + h·h          (Q, K, V, output)
                + n_mat·h·ffn × (experts on an MoE layer) + h·experts (router)
                + n_mat·h·shared_experts·shared_ffn (MoE layer)
                + 4h (norm gains/biases) [+ biases 3h+2kv·h/a+ffn+h·… when ``bias``]
    embeddings  = V·h (+ V·h untied output) (+ s·h learned positions)

For GPT-style shapes (ffn = 4h, kv = a, biases, tied, learned positions) this
is Narayanan et al. 2021 (SC21) eq. for P = 12lh²(1 + 13/12h + (V+s)/12lh):

    >>> m = MODELS["gpt3-175b"]
    >>> l, h = m.layers, m.hidden
    >>> m.params == 12 * l * h**2 * (1 + 13 / (12 * h)) + (m.vocab + m.seq_len) * h
    True
    >>> round(m.params / 1e9, 1)
    174.6
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from ._check import check_keys, choice, flag, integer, number
from .errors import TrainingInputError

__all__ = ["ACTIVATIONS", "MODELS", "ModelSpec", "model_from_params"]

ACTIVATIONS = ("gelu", "swiglu")


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer's shape (see the module docstring)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    activation: str
    seq_len: int
    vocab: int
    experts: int = 1
    top_k: int = 1
    capacity_factor: float = 1.0
    moe_every: int = 1
    bias: bool = True
    tied_embeddings: bool = True
    learned_positions: bool = True
    source: str = ""
    dropout: bool = True
    """Dropout after attention and MLP (GPT-3/Megatron: 0.1; Llama 3, Mixtral: none)."""
    head_size: int = 0
    """Size of one attention head when it is not h / a (0): Qwen3 (128 with h = 2,048 and
    32 heads), GPT-OSS (64 with h = 2,880 and 64 heads); the queries are then a·d wide."""
    shared_experts: int = 0
    """Experts every token runs besides its top_k routed ones on an MoE layer (DeepSeekMoE:
    Dai et al. 2024, §3.2; DeepSeek-V3 1, Qwen3 and Mixtral 0): priced as one dense MLP of
    ``shared_width`` = shared_experts × ``shared_ffn``."""
    shared_ffn: int = 0
    """FFN width of one shared expert (0: the routed experts' ``ffn``)."""
    routing_skew: float = 1.0
    """Max / mean routed tokens over the EP ranks of an MoE layer (1: balanced). Under
    dropless routing the slowest rank's grouped GEMM and all-to-all carry
    max(capacity_factor, routing_skew) × its even share (:attr:`rank_load`)."""
    first_dense: int = 0
    """Leading layers whose MLP is dense even in an MoE model (DeepSeek-V3: 3)."""
    dense_ffn: int = 0
    """FFN width of the dense MLPs of an MoE model (0: ``ffn``; DeepSeek-V3: 18,432)."""
    q_lora_rank: int = 0
    """Multi-head latent attention (MLA): the queries' low-rank latent (0: projected
    directly from h). MLA is on when ``kv_lora_rank`` > 0."""
    kv_lora_rank: int = 0
    """MLA: the compressed key/value latent c_KV, the KV cache per token and layer."""
    qk_rope_dim: int = 0
    """MLA: the decoupled rotary part of each query/key head (its key shared by heads)."""
    qk_nope_dim: int = 0
    """MLA: the non-rotary part of each query/key head."""
    v_head_dim: int = 0
    """MLA: each value head's size (0: ``qk_nope_dim``)."""
    yarn: bool = False
    """Rotary embedding with YaRN's scaling (Peng et al. 2023, arXiv 2309.00071; GPT-OSS:
    Megatron-Bridge's ``GPTOSSProvider``, ``src/megatron/bridge/models/gpt_oss/
    gpt_oss_provider.py``: ``position_embedding_type = "yarn"``, factor 32): Megatron-Core
    then runs its unfused rotary (:data:`.layer.YARN_ROPE_ELEMENTS`)."""

    @property
    def head_dim(self) -> int:
        """d: ``head_size``, or h / a."""
        return self.head_size or self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        """Width of the queries and of the attention output, a·d (= h unless ``head_size``)."""
        return self.heads * self.head_dim

    @property
    def mla(self) -> bool:
        """Whether attention is multi-head latent attention (DeepSeek-V2/V3)."""
        return self.kv_lora_rank > 0

    @property
    def qk_dim(self) -> int:
        """Size of one query/key head: nope + rope under MLA, else d."""
        return self.qk_nope_dim + self.qk_rope_dim if self.mla else self.head_dim

    @property
    def v_dim(self) -> int:
        """Size of one value head (the attention output is a·v_dim wide)."""
        return (self.v_head_dim or self.qk_nope_dim) if self.mla else self.head_dim

    @property
    def kv_cache_elements(self) -> int:
        """Elements cached per token and layer at inference: MLA's d_c + d_R (DeepSeek-V2
        §2.1.2, Table 1: (d_c + d_R)·l, 4.5·d_h·l for V2/V3), else 2·kv_heads·d."""
        if self.mla:
            return self.kv_lora_rank + self.qk_rope_dim
        return 2 * self.kv_heads * self.head_dim

    @property
    def kv_gather_width(self) -> int:
        """Per token, the K and V elements attention reads (what CP all-gathers):
        2·kv_heads·d, or MLA's up-projected a·(d_qk + d_v)."""
        if self.mla:
            return self.heads * (self.qk_dim + self.v_dim)
        return 2 * self.kv_heads * self.head_dim

    def attention_projections(self) -> tuple[tuple[str, int, int, str], ...]:
        """The attention's weight GEMMs as (name, n, k, split) for T tokens (m = T):
        ``split`` "col" divides n by TP, "row" divides k, "none" is replicated (MLA's
        down-projections, as Megatron-Core's ``linear_q_down_proj`` /
        ``linear_kv_down_proj``). MLA (DeepSeek-V3 report §2.1.1, eqs. 1-11): W_DQ
        (h → d_c'), W_UQ + W_QR (d_c' → a·(d_n + d_R)), W_DKV + W_KR (h → d_c + d_R),
        W_UK + W_UV (d_c → a·(d_n + d_v)), W_O (a·d_v → h).

        >>> [p[0] for p in MODELS["llama3-8b"].attention_projections()]
        ['QKV', 'projection']
        """
        h, a = self.hidden, self.heads
        if not self.mla:
            kv = self.kv_heads * self.head_dim
            return (("QKV", self.q_dim + 2 * kv, h, "col"), ("projection", h, self.q_dim, "row"))
        q_out = a * self.qk_dim
        q: tuple[tuple[str, int, int, str], ...] = (
            (("Q down", self.q_lora_rank, h, "none"), ("Q up", q_out, self.q_lora_rank, "col"))
            if self.q_lora_rank else (("Q", q_out, h, "col"),))
        return q + (("KV down", self.kv_lora_rank + self.qk_rope_dim, h, "none"),
                    ("KV up", a * (self.qk_nope_dim + self.v_dim), self.kv_lora_rank, "col"),
                    ("projection", h, a * self.v_dim, "row"))

    @property
    def latent_width(self) -> int:
        """MLA's latents normed per token and layer (RMSNorm of c_Q and c_KV), else 0."""
        return self.q_lora_rank + self.kv_lora_rank if self.mla else 0

    @property
    def moe(self) -> bool:
        """Whether some MLPs are mixtures of experts."""
        return self.experts > 1

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts."""
        return (self.layers - self.first_dense) // self.moe_every if self.moe else 0

    @property
    def rank_load(self) -> float:
        """The slowest EP rank's routed tokens over its even share T·k/E per expert: the
        capacity padding c, or the measured skew when it exceeds c (dropless)."""
        return max(self.capacity_factor, self.routing_skew)

    @property
    def dense_width(self) -> int:
        """FFN width of a dense layer's MLP: ``dense_ffn``, or ``ffn``."""
        return self.dense_ffn or self.ffn

    def mlp_width_per_token(self, capacity: bool = True) -> float:
        """MLP width a token runs, averaged over the layers: dense layers their width,
        MoE layers top_k (× capacity) routed experts + the shared experts."""
        if not self.moe:
            return float(self.ffn)
        share = self.moe_layers / self.layers
        kc = self.top_k * (self.capacity_factor if capacity else 1.0)
        return (1 - share) * self.dense_width + share * (kc * self.ffn + self.shared_width)

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices of one MLP: 2 (GeLU), 3 (SwiGLU)."""
        return 3 if self.activation == "swiglu" else 2

    @property
    def attention_params(self) -> int:
        """Q, K, V and output projections of one layer (+ biases; + MLA's latent norms)."""
        if self.mla:
            return sum(n * k for _, n, k, _ in self.attention_projections()) \
                + self.latent_width
        h, q, kv = self.hidden, self.q_dim, self.kv_heads * self.head_dim
        weights = h * (q + 2 * kv) + q * h
        return weights + ((q + 2 * kv + h) if self.bias else 0)

    @property
    def mlp_params(self) -> int:
        """One dense MLP (one expert) (+ biases)."""
        n = self.mlp_matrices
        biases = ((n - 1) * self.ffn + self.hidden) if self.bias else 0
        return n * self.hidden * self.ffn + biases

    @property
    def shared_width(self) -> int:
        """Width of the MLP every token runs on an MoE layer besides its routed experts."""
        return self.shared_experts * (self.shared_ffn or self.ffn) if self.moe else 0

    @property
    def shared_params(self) -> int:
        """Shared experts of one MoE layer (+ biases: n_mat − 1 up widths and h per expert)."""
        if not self.shared_width:
            return 0
        n, w = self.mlp_matrices, self.shared_width
        biases = ((n - 1) * w + self.shared_experts * self.hidden) if self.bias else 0
        return n * self.hidden * w + biases

    @property
    def dense_mlp_params(self) -> int:
        """One dense layer's MLP (+ biases) at ``dense_width``."""
        n, w = self.mlp_matrices, self.dense_width
        return n * self.hidden * w + (((n - 1) * w + self.hidden) if self.bias else 0)

    @property
    def layer_params(self) -> int:
        """A dense layer: attention + MLP + two norms (gain and bias each)."""
        return self.attention_params + self.dense_mlp_params + 4 * self.hidden

    @property
    def expert_params(self) -> int:
        """Parameters held in experts over the whole model (0 if dense)."""
        return self.moe_layers * self.experts * self.mlp_params

    @property
    def embedding_params(self) -> int:
        """Input embedding (+ untied output layer) (+ learned positions)."""
        e = self.vocab * self.hidden
        if not self.tied_embeddings:
            e += self.vocab * self.hidden
        if self.learned_positions:
            e += self.seq_len * self.hidden
        return e

    @property
    def params(self) -> int:
        """Total parameters (every expert counted)."""
        dense = self.layers * self.layer_params
        per = (self.experts * self.mlp_params - self.dense_mlp_params
               + self.hidden * self.experts + self.shared_params)
        extra = self.moe_layers * per
        return dense + extra + self.embedding_params

    @property
    def active_params(self) -> int:
        """Parameters a token passes through (top_k routed + the shared experts of an MoE layer)."""
        if not self.moe:
            return self.params
        return self.params - self.moe_layers * (self.experts - self.top_k) * self.mlp_params

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``params`` added for display; ignored on input)."""
        out = asdict(self)
        out["params"] = self.params
        return out


_FIELDS = {f for f in ModelSpec.__dataclass_fields__} | {"params"}


def _gpt(name: str, layers: int, hidden: int, heads: int, source: str) -> ModelSpec:
    return ModelSpec(name, layers, hidden, heads, heads, 4 * hidden, "gelu", 2048, 51200,
                     source=source)


def _llama(name: str, layers: int, hidden: int, heads: int, ffn: int, source: str) -> ModelSpec:
    return ModelSpec(name, layers, hidden, heads, 8, ffn, "swiglu", 8192, 128256, bias=False,
                     tied_embeddings=False, learned_positions=False, source=source,
                     dropout=False)


_MEGATRON = ("Narayanan et al. 2021, Efficient Large-Scale Language Model Training on GPU "
             "Clusters (SC21), Table 1; seq 2048, vocab 51,200")
_KORTHIKANTI = ("Korthikanti et al. 2022, Reducing Activation Recomputation in Large "
                "Transformer Models, Table 3")
_LLAMA3 = "Dubey et al. 2024, The Llama 3 Herd of Models, Table 3"
_QWEN3 = ("Qwen Team 2025, Qwen3 Technical Report, Tables 1-2 (MoE: 128 experts, 8 "
          "activated, head size 128, no shared experts) and the models' config.json "
          "(hidden, expert FFN, vocab 151,936); sequence 4,096 as in the Megatron-Bridge rows")

MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        _gpt("megatron-1.7b", 24, 2304, 24, _MEGATRON),
        _gpt("megatron-3.6b", 30, 3072, 32, _MEGATRON),
        _gpt("megatron-7.5b", 36, 4096, 32, _MEGATRON),
        _gpt("megatron-18b", 40, 6144, 48, _MEGATRON),
        _gpt("megatron-22b", 48, 6144, 64, _KORTHIKANTI),
        _gpt("megatron-39b", 48, 8192, 64, _MEGATRON),
        _gpt("megatron-76b", 60, 10240, 80, _MEGATRON),
        _gpt("megatron-145b", 80, 12288, 96, _MEGATRON),
        _gpt("gpt3-175b", 96, 12288, 96,
             "Brown et al. 2020, Language Models are Few-Shot Learners, Table 2.1 "
             "(vocab padded to 51,200 as Megatron-LM does)"),
        _gpt("megatron-310b", 96, 16384, 128, _MEGATRON),
        _gpt("megatron-530b", 105, 20480, 128,
             _MEGATRON + "; Smith et al. 2022 (MT-NLG 530B)"),
        _gpt("megatron-1t", 128, 25600, 160, _MEGATRON),
        _llama("llama3-8b", 32, 4096, 32, 14336, _LLAMA3),
        _llama("llama3-70b", 80, 8192, 64, 28672, _LLAMA3),
        _llama("llama3-405b", 126, 16384, 128, 53248, _LLAMA3),
        ModelSpec("mixtral-8x7b", 32, 4096, 32, 8, 14336, "swiglu", 4096, 32000, experts=8,
                  top_k=2, bias=False, tied_embeddings=False, learned_positions=False,
                  dropout=False,
                  source="Jiang et al. 2024, Mixtral of Experts, Table 1 (seq 4096 for training)"),
        ModelSpec("mixtral-8x22b", 56, 6144, 48, 8, 16384, "swiglu", 4096, 32768, experts=8,
                  top_k=2, bias=False, tied_embeddings=False, learned_positions=False,
                  dropout=False, source="Mistral AI, Mixtral-8x22B-v0.1 config.json "
                  "(56 layers, h 6,144, 48 heads, 8 KV heads, expert FFN 16,384, vocab 32,768)"),
        ModelSpec("qwen3-30b-a3b", 48, 2048, 32, 4, 768, "swiglu", 4096, 151936, experts=128,
                  top_k=8, bias=False, tied_embeddings=False, learned_positions=False,
                  dropout=False, head_size=128, source=_QWEN3),
        ModelSpec("qwen3-235b-a22b", 94, 4096, 64, 4, 1536, "swiglu", 4096, 151936,
                  experts=128, top_k=8, bias=False, tied_embeddings=False,
                  learned_positions=False, dropout=False, head_size=128, source=_QWEN3),
        ModelSpec("deepseek-v3", 61, 7168, 128, 128, 2048, "swiglu", 4096, 129280,
                  experts=256, top_k=8, bias=False, tied_embeddings=False,
                  learned_positions=False, dropout=False, shared_experts=1, first_dense=3,
                  dense_ffn=18432, q_lora_rank=1536, kv_lora_rank=512, qk_rope_dim=64,
                  qk_nope_dim=128, v_head_dim=128, head_size=128,
                  source="DeepSeek-AI 2024, DeepSeek-V3 Technical Report (arXiv 2412.19437), "
                  "§4.2 Hyper-Parameters (61 layers, h 7,168, 128 heads of d_h 128, MLA d_c "
                  "512, d_c' 1,536, d_R 64; first 3 layers dense, then 1 shared + 256 routed "
                  "experts of 2,048, top-8; 671 B total, 37 B active, the 14 B MTP module "
                  "not modelled) and its config.json (dense FFN 18,432, vocab 129,280); "
                  "sequence 4,096 as pre-trained"),
        ModelSpec("gpt-oss-120b", 36, 2880, 64, 8, 2880, "swiglu", 4096, 201088, experts=128,
                  top_k=4, bias=True, tied_embeddings=False, learned_positions=False,
                  dropout=False, head_size=64, yarn=True,
                  source="OpenAI 2025, gpt-oss-120b & gpt-oss-20b Model Card, Table 1 and §2 "
                  "(36 layers, residual width 2,880, 64 query / 8 KV heads of 64, 128 experts "
                  "top-4, o200k vocabulary; its alternating 128-token sliding-window "
                  "attention is priced as full causal attention)"),
    )
}


def model_from_params(data: Mapping[str, Any] | str, path: str = "model.") -> ModelSpec:
    """A catalogue slug, or a dict of fields (optionally ``"base": slug`` to edit one).

    Errors name the field under ``path`` (``model.heads``).

    >>> model_from_params("llama3-8b").kv_heads
    8
    >>> model_from_params({"layers": 2, "hidden": 64, "heads": 4, "seq_len": 16, "vocab": 100}).ffn
    256
    >>> model_from_params({"base": "gpt3-175b", "layers": 48}).layers
    48
    """
    if isinstance(data, str):
        if data not in MODELS:
            raise TrainingInputError(
                path.rstrip("."), f"unknown model {data!r} (choose from {', '.join(MODELS)})"
            )
        return MODELS[data]
    if not isinstance(data, Mapping):
        raise TrainingInputError(path.rstrip("."), "a catalogue slug or an object of fields")
    check_keys(data, _FIELDS | {"base"}, path)
    base: dict[str, Any] = {}
    if "base" in data:
        base = asdict(model_from_params(data["base"], f"{path}base."))
    merged = {**base, **{k: v for k, v in data.items() if k not in ("base", "params")}}
    for key in ("layers", "hidden", "heads", "seq_len", "vocab"):
        if key not in merged:
            raise TrainingInputError(f"{path}{key}", "required")
    layers = integer(merged["layers"], f"{path}layers", high=10_000)
    hidden = integer(merged["hidden"], f"{path}hidden", high=1 << 20)
    heads = integer(merged["heads"], f"{path}heads", high=hidden)
    head_size = integer(merged.get("head_size", 0), f"{path}head_size", low=0, high=4096)
    if hidden % heads and not head_size:
        raise TrainingInputError(f"{path}heads", f"must divide hidden ({hidden})")
    kv = integer(merged.get("kv_heads", heads), f"{path}kv_heads", high=heads)
    if heads % kv:
        raise TrainingInputError(f"{path}kv_heads", f"must divide heads ({heads})")
    activation = choice(merged.get("activation", "gelu"), f"{path}activation", ACTIVATIONS)
    default_ffn = 4 * hidden if activation == "gelu" else int(8 * hidden / 3)
    ffn = integer(merged.get("ffn", default_ffn), f"{path}ffn", high=1 << 24)
    seq = integer(merged["seq_len"], f"{path}seq_len", high=1 << 24)
    vocab = integer(merged["vocab"], f"{path}vocab", high=1 << 24)
    experts = integer(merged.get("experts", 1), f"{path}experts", high=4096)
    top_k = integer(merged.get("top_k", 1), f"{path}top_k", high=experts)
    cap = number(merged.get("capacity_factor", 1.0), f"{path}capacity_factor", low=1.0, high=64)
    every = integer(merged.get("moe_every", 1), f"{path}moe_every", high=layers)
    skew = number(merged.get("routing_skew", 1.0), f"{path}routing_skew", low=1.0, high=4096)
    shared = integer(merged.get("shared_experts", 0), f"{path}shared_experts", low=0, high=64)
    shared_ffn = integer(merged.get("shared_ffn", 0), f"{path}shared_ffn", low=0, high=1 << 24)
    first_dense = integer(merged.get("first_dense", 0), f"{path}first_dense", low=0,
                          high=layers - 1)
    extra = {k: integer(merged.get(k, 0), f"{path}{k}", low=0, high=1 << 16)
             for k in ("dense_ffn", "q_lora_rank", "kv_lora_rank", "qk_rope_dim", "qk_nope_dim",
                       "v_head_dim")}
    if extra["kv_lora_rank"] and not extra["qk_nope_dim"]:
        raise TrainingInputError(f"{path}qk_nope_dim", "required with kv_lora_rank (MLA)")
    flags = {
        k: flag(merged.get(k, getattr(ModelSpec, k)), f"{path}{k}")
        for k in ("bias", "tied_embeddings", "learned_positions", "dropout", "yarn")
    }
    name = merged.get("name", "custom")
    if not isinstance(name, str) or len(name) > 100:
        raise TrainingInputError(f"{path}name", "a string of at most 100 characters")
    source = merged.get("source", "")
    if not isinstance(source, str):
        raise TrainingInputError(f"{path}source", "a string")
    spec = ModelSpec(name, layers, hidden, heads, kv, ffn, activation, seq, vocab, experts,
                     top_k, cap, every, source=source, head_size=head_size,
                     shared_experts=shared, shared_ffn=shared_ffn, first_dense=first_dense,
                     **flags)
    spec = replace(spec, routing_skew=skew, dense_ffn=extra["dense_ffn"],
                   q_lora_rank=extra["q_lora_rank"],
                   kv_lora_rank=extra["kv_lora_rank"], qk_rope_dim=extra["qk_rope_dim"],
                   qk_nope_dim=extra["qk_nope_dim"], v_head_dim=extra["v_head_dim"])
    return spec
