"""tomrl's continuous-batching decoder for Llama, Qwen2 and Qwen3 models (the ``hf`` engine's ``slots`` path).

    from tomrl.generation import SlotGenerator, SlotModel, Sampling, eos_token_ids
    generator = SlotGenerator(SlotModel(model), tokenizer, eos_token_ids(model, tokenizer), batch_size=16)
    for done in generator.run(token_lists, Sampling(temperature=0, max_new_tokens=128, logprobs=True)):
        done.index, done.text, done.token_ids, done.logprobs

Used by :class:`tomrl.generation.hf.HFEngine` (``tomrl eval``) and by validation during training
(:mod:`tomrl.training.validation`). Run its tests with
``pytest tests/generation/test_hf_engine.py``; measure it with
``python benchmarks/bench_generation.py --compare-decoders``.

A decode loop written around the model's own weights and rotary embedding (only the layer's
arithmetic is re-expressed, checked against the model's own forward pass). On a small CPU,
``model.generate`` spends most of each step on per-operation overhead and on copying a growing
cache; this path avoids both:

- *continuous batching*: each of ``batch_size`` cache slots holds one prompt; when a prompt
  finishes (``</answer>``, EOS or its token budget) its slot is refilled from the queue, so the
  batch stays full instead of waiting for its slowest row;
- a preallocated KV cache written in place (no ``torch.cat`` per step), attention over each
  row's own length through a mask;
- the prompts' common token prefix (system prompt and chat header) is computed once, stored
  once, and attended to with one matmul for all rows; only each prompt's own part is prefilled;
- prompts are prefilled longest first in right-padded groups (little padding);
- a prompt repeated within one prefill pass (an RL step samples each prompt several times) is
  prefilled once, its keys and values copied to the slots of its repeats (``share_repeats``);
- when the queue is empty, finished rows are dropped from the batch (compaction);
- q/k/v and gate/up projections fused into one matmul each, RMSNorm in three operations;
- top-p sampling looks at the top 64 tokens first and sorts the whole vocabulary only when a
  row's top 64 hold less than ``top_p`` of the mass (the same tokens are drawn either way);
- each prompt draws its tokens from its own generator (seeded by ``Sampling.seeds``,
  :func:`tomrl.generation.base.sample_tokens`), so a sampled answer is the same whichever prompts
  share the batch, in any order, batch size or resumed run (up to the floating-point differences
  of batched arithmetic, which can flip a near-tie).

Greedy outputs equal ``model.generate``'s in float32 (tested on tiny Llama, Qwen2 and Qwen3
models, token ids included, and on the embedded model in the slow tests). With
``Sampling.logprobs`` each completion also carries the float32 log-probability of every sampled
token under ``logits / temperature`` (checked against a forward pass of the model), which an RL
loss needs for the sampling policy.

Why this hand-written decoder is kept rather than transformers' own continuous batching
(``model.generate_batch``, what TRL's ``use_transformers_paged`` runs) or plain batched
``model.generate``: it is the fastest of the three on a CPU, and its greedy tokens equal
``model.generate``'s (``generate_batch``'s differed on 12 of 16 prompts here). Measured side by side in one process
(``bench_generation.py --compare-decoders --prompts 16 --new-tokens 128 --threads 1``; embedded
SmolLM2-135M, float32, greedy, EOS ignored, 16 ToMi prompts of 265 tokens on average, 128 new
tokens each; AMD EPYC, 2 cores, torch 2.13, transformers 5.23; the machine was shared, load
average about 7, so only the ratios mean anything):

=====================================  ==========  =============  ===============================
decoder                                tokens/s    time vs slots  token ids equal to the slots'
=====================================  ==========  =============  ===============================
a. ``SlotGenerator`` (this module)     24.1        1.0x           16/16
b. ``model.generate``, one batch       14.2        1.7x           16/16
c. ``model.generate_batch`` (paged)    5.6         4.3x           4/16
=====================================  ==========  =============  ===============================

(2 torch threads were asked for; on the loaded machine they made a single warm-up run take
minutes, as the threads wait on each other at every operation, so the figures use 1.)
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, Iterator

from tomrl.generation.base import Completion, Sampling, cut_at_stop, request_generators, sample_tokens

SLOT_ARCHITECTURES = ("llama", "qwen2", "qwen3")
MIN_PREFIX_TOKENS = 16  # a shorter common prefix is not worth a separate pass
PREFILL_TOKEN_BUDGET = 4096  # prompt tokens per prefill pass (bounds activation memory)
PACK_BATCH_HINT = 64  # rows the prepacked weights are laid out for (any row count works)
_STOP_CANDIDATES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # tokenizer -> {final chars: token ids}


def slot_path_supported(model) -> bool:
    """Whether the ``slots`` path knows this model's layout (dense attention, no sliding window)."""
    config = model.config
    if config.model_type not in SLOT_ARCHITECTURES:
        return False
    if getattr(config, "use_sliding_window", False) or "sliding_attention" in (getattr(config, "layer_types", None) or []):
        return False
    inner = getattr(model, "model", None)
    return all(hasattr(inner, name) for name in ("embed_tokens", "layers", "norm", "rotary_emb")) and hasattr(model, "lm_head")



class _SlotCache:
    """Each slot's own keys and values (its prompt minus the shared prefix, then its output).

    Per layer ``[slots, kv_heads, capacity, head_dim]``; ``lengths`` counts the positions in use.
    Attention reads the whole capacity (kept contiguous, which the batched matmuls need) and
    masks what is beyond each slot's length. Capacity grows by an eighth (at least ``GROWTH``
    positions): little unused capacity to read, and few copies of the cache.
    """

    GROWTH = 64

    def __init__(self, layers: int, slots: int, kv_heads: int, head_dim: int, capacity: int, dtype, device):
        import torch

        capacity = -(-capacity // self.GROWTH) * self.GROWTH
        shape = (slots, kv_heads, capacity, head_dim)
        self.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.lengths = torch.zeros(slots, dtype=torch.long, device=device)

    @property
    def capacity(self) -> int:
        return self.keys[0].shape[2]

    @property
    def slots(self) -> int:
        return self.keys[0].shape[0]

    def ensure_capacity(self, needed: int) -> None:
        import torch

        if needed <= self.capacity:
            return
        new_capacity = max(needed, self.capacity + max(self.GROWTH, self.capacity // 8))
        new_capacity = -(-new_capacity // self.GROWTH) * self.GROWTH
        for store in (self.keys, self.values):
            for i, old in enumerate(store):
                grown = torch.zeros((*old.shape[:2], new_capacity, old.shape[3]), dtype=old.dtype, device=old.device)
                grown[:, :, : old.shape[2]] = old
                store[i] = grown

    def copy_slots(self, sources, targets, width: int) -> None:
        """Give slots ``targets`` the first ``width`` positions and the lengths of slots ``sources`` (LongTensors)."""
        for store in (self.keys, self.values):
            for tensor in store:
                tensor[targets, :, :width] = tensor[sources, :, :width]
        self.lengths[targets] = self.lengths[sources]

    def keep(self, rows) -> None:
        """Keep only slots ``rows`` (a LongTensor), in that order."""
        for store in (self.keys, self.values):
            for i, old in enumerate(store):
                store[i] = old.index_select(0, rows)
        self.lengths = self.lengths.index_select(0, rows)


class _Prefix:
    """Keys and values of the prompts' shared prefix, stored once for all slots."""

    def __init__(self, length: int, keys: list, values: list):
        self.length = length
        self.keys = keys  # per layer [kv_heads, length, head_dim]
        self.keys_transposed = [k.transpose(1, 2).contiguous() for k in keys]  # [kv_heads, head_dim, length]
        self.values = values


@dataclass
class _LayerWeights:
    """One decoder layer's tensors, q/k/v and gate/up fused (biases may be None)."""

    qkv_weight: Any
    qkv_bias: Any
    o_weight: Any
    o_bias: Any
    input_norm: Any
    post_norm: Any
    gate_up_weight: Any
    gate_up_bias: Any
    down_weight: Any
    down_bias: Any
    q_norm: Any  # Qwen3's per-head norms (modules), None elsewhere
    k_norm: Any


def _packing_works(device, dtype) -> bool:
    """Whether oneDNN's prepacked linear weights are available and exact here (CPU, bf16)."""
    import torch

    if device.type != "cpu" or dtype != torch.bfloat16 or not torch.backends.mkldnn.is_available():
        return False
    try:
        weight = torch.randn(16, 32).to(dtype)
        hidden = torch.randn(3, 32).to(dtype)
        packed = torch.ops.mkldnn._reorder_linear_weight(weight, PACK_BATCH_HINT)
        result = torch.ops.mkldnn._linear_pointwise(hidden, packed, None, "none", [], "")
    except (AttributeError, RuntimeError):  # a torch build without these oneDNN ops
        return False
    return torch.equal(result, torch.nn.functional.linear(hidden, weight))


class SlotModel:
    """Forward passes of a Llama/Qwen2/Qwen3 model over a :class:`_SlotCache`.

    Uses the model's own weights and rotary embedding. The q/k/v and gate/up projections are
    fused into one matmul each (a copy of those weights, made once) and the layer is written as
    plain tensor operations without module calls: on a small CPU the number of operations per
    step, not only their size, bounds decoding speed (``torch.compile`` was measured slower
    here). On CPUs with native bf16 the matmul weights are also prepacked for oneDNN
    (``pack_weights``; bit-identical results, about 2x the weights' memory).
    """

    def __init__(self, model, pack_weights: bool = True):
        import torch

        self.torch = torch
        config = model.config
        inner = model.model
        self.embed = inner.embed_tokens
        self.rotary = inner.rotary_emb
        self.final_norm = inner.norm
        self.lm_head = model.lm_head
        first = inner.layers[0]
        self.head_dim = first.self_attn.head_dim
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.group = self.heads // self.kv_heads
        self.scaling = first.self_attn.scaling
        self.eps = first.input_layernorm.variance_epsilon
        self.act = torch.nn.functional.silu if config.hidden_act == "silu" else first.mlp.act_fn
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype

        def fused(modules):
            biases = [m.bias for m in modules]
            bias = torch.cat(biases).detach() if all(b is not None for b in biases) else None
            return torch.cat([m.weight for m in modules]).detach(), bias

        self.layers: list[_LayerWeights] = []
        for layer in inner.layers:
            attention, mlp = layer.self_attn, layer.mlp
            qkv_weight, qkv_bias = fused([attention.q_proj, attention.k_proj, attention.v_proj])
            gate_up_weight, gate_up_bias = fused([mlp.gate_proj, mlp.up_proj])
            self.layers.append(
                _LayerWeights(
                    qkv_weight=qkv_weight,
                    qkv_bias=qkv_bias,
                    o_weight=attention.o_proj.weight,
                    o_bias=attention.o_proj.bias,
                    input_norm=layer.input_layernorm.weight,
                    post_norm=layer.post_attention_layernorm.weight,
                    gate_up_weight=gate_up_weight,
                    gate_up_bias=gate_up_bias,
                    down_weight=mlp.down_proj.weight,
                    down_bias=mlp.down_proj.bias,
                    q_norm=getattr(attention, "q_norm", None),
                    k_norm=getattr(attention, "k_norm", None),
                )
            )
        self.lm_head_weight, self.lm_head_bias = self.lm_head.weight, self.lm_head.bias
        self.packed = pack_weights and _packing_works(self.device, self.dtype)
        if self.packed:
            # oneDNN's prepacked bf16 weights (what torch.compile's CPU backend uses): the
            # matmuls skip re-laying out the weights at every call, 1.1-1.4x faster on the
            # 2-core EPYC with bit-identical results. A packed copy of every matmul weight.
            pack = torch.ops.mkldnn._reorder_linear_weight
            for weights in self.layers:
                for name in ("qkv_weight", "o_weight", "gate_up_weight", "down_weight"):
                    setattr(weights, name, pack(getattr(weights, name).detach(), PACK_BATCH_HINT))
            self.lm_head_weight = pack(self.lm_head.weight.detach(), PACK_BATCH_HINT)

    def _linear(self, hidden, weight, bias):
        if self.packed:
            return self.torch.ops.mkldnn._linear_pointwise(hidden, weight, bias, "none", [], "")
        return self.torch.nn.functional.linear(hidden, weight, bias)

    def _norm(self, weight, hidden):
        # LlamaRMSNorm's arithmetic (float32 inside, weight applied in the model dtype) in
        # three operations instead of eight.
        normed = self.torch.nn.functional.rms_norm(hidden.float(), (hidden.shape[-1],), eps=self.eps)
        return weight * normed.to(hidden.dtype)

    def _qkv(self, layer: _LayerWeights, hidden, cos, sin):
        """Query, key, value ``[..., heads, head_dim]`` with rotary embedding applied."""
        torch = self.torch
        qkv = self._linear(hidden, layer.qkv_weight, layer.qkv_bias)
        qkv = qkv.view(*hidden.shape[:-1], self.heads + 2 * self.kv_heads, self.head_dim)
        if layer.q_norm is not None:
            query = layer.q_norm(qkv[..., : self.heads, :])
            key = layer.k_norm(qkv[..., self.heads : self.heads + self.kv_heads, :])
            rotated = torch.cat([query, key], dim=-2)
        else:
            rotated = qkv[..., : self.heads + self.kv_heads, :]
        half = self.head_dim // 2
        swapped = torch.cat([-rotated[..., half:], rotated[..., :half]], dim=-1)
        rotated = rotated * cos + swapped * sin
        return rotated[..., : self.heads, :], rotated[..., self.heads :, :], qkv[..., self.heads + self.kv_heads :, :]

    def _attention_output_and_mlp(self, layer: _LayerWeights, hidden, attended):
        hidden = hidden + self._linear(attended, layer.o_weight, layer.o_bias)
        gate, up = self._linear(self._norm(layer.post_norm, hidden), layer.gate_up_weight, layer.gate_up_bias).chunk(2, dim=-1)
        return hidden + self._linear(self.act(gate) * up, layer.down_weight, layer.down_bias)

    def logits(self, last_hidden):
        return self._linear(self._norm(self.final_norm.weight, last_hidden), self.lm_head_weight, self.lm_head_bias).float()

    def prefill(self, cache: _SlotCache, slots: list[int], token_lists: list[list[int]], prefix: _Prefix | None):
        """Run prompts (minus the shared prefix) into ``slots``; returns last-position logits."""
        torch = self.torch
        F = torch.nn.functional
        count = len(token_lists)
        width = max(len(t) for t in token_lists)
        start = prefix.length if prefix is not None else 0
        cache.ensure_capacity(width + 1)
        ids = torch.zeros((count, width), dtype=torch.long)
        for row, tokens in enumerate(token_lists):
            ids[row, : len(tokens)] = torch.tensor(tokens)
        ids = ids.to(self.device)
        lengths = torch.tensor([len(t) for t in token_lists], device=self.device)
        slot_index = torch.tensor(slots, device=self.device)
        positions = (torch.arange(width, device=self.device) + start).unsqueeze(0).expand(count, width)
        hidden = self.embed(ids)
        cos, sin = self.rotary(hidden, positions)
        cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)
        # Right padding: a real token never attends to a later (padding) position, so the causal
        # mask alone is exact. With a prefix every token also sees all prefix positions, in one of
        # two ways, whichever does less work: for prompts longer than the prefix, `start` dummy
        # query rows go first so that the plain causal mask (aligned top-left) is right, and the
        # causal kernel skips the masked half (about 20 % faster on long Hi-ToM prompts); for
        # short ones an explicit mask avoids computing the dummy rows.
        padded_causal = start > 0 and width > start
        dummy_queries = None
        mask = None
        if padded_causal:
            dummy_queries = torch.zeros((count, self.heads, start, self.head_dim), dtype=self.dtype, device=self.device)
        elif start:
            causal = torch.ones(width, width, dtype=torch.bool, device=self.device).tril()
            mask = torch.cat([torch.ones(width, start, dtype=torch.bool, device=self.device), causal], dim=1)
        for i, layer in enumerate(self.layers):
            query, key, value = self._qkv(layer, self._norm(layer.input_norm, hidden), cos, sin)
            query, key, value = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)
            cache.keys[i][slot_index, :, :width] = key
            cache.values[i][slot_index, :, :width] = value
            if start:
                key = torch.cat([prefix.keys[i].expand(count, -1, -1, -1), key], dim=2)
                value = torch.cat([prefix.values[i].expand(count, -1, -1, -1), value], dim=2)
            if padded_causal:
                query = torch.cat([dummy_queries, query], dim=2)
                out = F.scaled_dot_product_attention(query, key, value, is_causal=True, scale=self.scaling, enable_gqa=True)[:, :, start:]
            else:
                causal = mask is None
                out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, is_causal=causal, scale=self.scaling, enable_gqa=True)
            hidden = self._attention_output_and_mlp(layer, hidden, out.transpose(1, 2).reshape(count, width, -1))
        cache.lengths[slot_index] = lengths
        return self.logits(hidden[torch.arange(count, device=self.device), lengths - 1])

    def compute_prefix(self, tokens: list[int]) -> _Prefix:
        scratch = _SlotCache(len(self.layers), 1, self.kv_heads, self.head_dim, len(tokens) + 1, self.dtype, self.device)
        self.prefill(scratch, [0], [tokens], None)
        n = len(tokens)
        return _Prefix(n, [k[0, :, :n].contiguous() for k in scratch.keys], [v[0, :, :n].contiguous() for v in scratch.values])

    def decode(self, cache: _SlotCache, tokens, prefix: _Prefix | None):
        """One step for every slot: feed ``tokens`` [slots]; returns logits [slots, vocab]."""
        torch = self.torch
        slots, capacity = cache.slots, cache.capacity
        kv_heads, group, head_dim = self.kv_heads, self.group, self.head_dim
        start = prefix.length if prefix is not None else 0
        positions = cache.lengths  # index of the new token in each slot's own cache
        hidden = self.embed(tokens)  # [slots, hidden]
        # [slots, 1, head_dim]: broadcasts over the heads axis of q and k.
        cos, sin = self.rotary(hidden.unsqueeze(1), (positions + start).unsqueeze(1))
        # Additive mask over [prefix | own cache]: the prefix is always visible, own positions
        # up to and including the new token.
        own = torch.arange(capacity, device=self.device).unsqueeze(0) <= positions.unsqueeze(1)
        bias = torch.zeros((slots, start + capacity), dtype=self.dtype, device=self.device)
        bias[:, start:].masked_fill_(~own, float("-inf"))
        bias = bias.view(slots, 1, 1, -1)
        rows = torch.arange(slots, device=self.device)
        for i, layer in enumerate(self.layers):
            query, key, value = self._qkv(layer, self._norm(layer.input_norm, hidden), cos, sin)
            keys, values = cache.keys[i], cache.values[i]
            keys[rows, :, positions] = key
            values[rows, :, positions] = value
            # One new token per row: each kv head's query group is a tiny [group, head_dim]
            # matrix, so grouped-query attention needs no repeated keys; the shared prefix is
            # one matmul for all rows at once.
            query = (query * self.scaling).view(slots, kv_heads, group, head_dim)
            scores = torch.matmul(query, keys.transpose(2, 3))
            if start:
                by_head = query.transpose(0, 1).reshape(kv_heads, slots * group, head_dim)
                shared = torch.bmm(by_head, prefix.keys_transposed[i]).view(kv_heads, slots, group, start)
                scores = torch.cat([shared.transpose(0, 1), scores], dim=-1)
            probs = torch.softmax(scores + bias, dim=-1, dtype=torch.float32).to(self.dtype)
            out = torch.matmul(probs[..., start:], values)
            if start:
                shared_probs = probs[..., :start].transpose(0, 1).reshape(kv_heads, slots * group, start)
                out = out + torch.bmm(shared_probs, prefix.values[i]).view(kv_heads, slots, group, head_dim).transpose(0, 1)
            hidden = self._attention_output_and_mlp(layer, hidden, out.reshape(slots, -1))
        cache.lengths = positions + 1
        return self.logits(hidden)


class SlotGenerator:
    """Continuous-batching decode loop over a :class:`SlotModel` (one use per request)."""

    def __init__(
        self, slot_model: SlotModel, tokenizer, eos_ids: set[int], batch_size: int, prefix_cache: bool = True, share_repeats: bool = True
    ):
        import torch

        self.torch = torch
        self.model = slot_model
        self.tokenizer = tokenizer
        self.eos_ids = eos_ids
        self.batch_size = batch_size
        self.prefix_cache = prefix_cache
        self.share_repeats = share_repeats
        self.device = slot_model.device

    def _prefill(self, cache: _SlotCache, slots: list[int], prompts: list[int], token_lists, start: int, prefix: _Prefix | None):
        """Prefill prompts ``prompts`` into ``slots``; one row of last-position logits per slot.

        With ``share_repeats``, a prompt that occurs several times in the pass (an RL step samples
        each prompt several times, one after another) is computed once and its keys and values are
        copied to the slots of its repeats, which then share its logits row: the outputs are those
        of prefilling every copy (each row is still sampled on its own), for a fraction of the work,
        which dominates a CPU step with long stories.
        """
        torch = self.torch
        first: dict[tuple[int, ...], int] = {}  # prompt tokens -> position of its first occurrence in `prompts`
        owner = [first.setdefault(tuple(token_lists[i]), position) for position, i in enumerate(prompts)]
        distinct = sorted(first.values())
        if not self.share_repeats or len(distinct) == len(prompts):
            return self.model.prefill(cache, slots, [token_lists[i][start:] for i in prompts], prefix)
        logits = self.model.prefill(cache, [slots[p] for p in distinct], [token_lists[prompts[p]][start:] for p in distinct], prefix)
        repeats = [p for p, o in enumerate(owner) if o != p]
        width = max(len(token_lists[prompts[p]]) - start for p in repeats)
        cache.copy_slots(
            torch.tensor([slots[owner[p]] for p in repeats], device=self.device),
            torch.tensor([slots[p] for p in repeats], device=self.device),
            width,
        )
        row = {p: r for r, p in enumerate(distinct)}
        return logits.index_select(0, torch.tensor([row[o] for o in owner], device=logits.device))

    def _choose(self, logits, sampling: Sampling, generators: list):
        """The next token of every row (row i drawn from ``generators[i]``, see :func:`sample_tokens`), and
        (with ``sampling.logprobs``) its float32 log-probability under ``logits / temperature`` (the
        unscaled logits when greedy), as a list; else None."""
        if sampling.ignore_eos and self.eos_ids:
            # As model.generate's min_new_tokens: EOS is never chosen.
            logits[:, sorted(self.eos_ids)] = float("-inf")
        tokens = sample_tokens(logits, sampling, generators)
        if not sampling.logprobs:
            return tokens, None
        scaled = logits.float() if sampling.greedy else logits.float() / sampling.temperature
        chosen = self.torch.log_softmax(scaled, dim=-1).gather(1, tokens.unsqueeze(1)).squeeze(1)
        return tokens, chosen.tolist()

    def _stop_candidates(self, sampling: Sampling) -> set[int]:
        """Token ids whose text contains the last character of a stop string: only those can
        complete one, so the (costly) text check runs only when one of them is generated.
        Computed once per tokenizer and stop set (decoding the vocabulary takes about 0.5 s)."""
        if not sampling.stop:
            return set()
        finals = frozenset(s[-1] for s in sampling.stop if s)
        known = _STOP_CANDIDATES.setdefault(self.tokenizer, {})
        if finals not in known:
            size = len(self.tokenizer)
            pieces = self.tokenizer.batch_decode([[i] for i in range(size)])
            raw = self.tokenizer.convert_ids_to_tokens(list(range(size)))
            known[finals] = {i for i, (text, piece) in enumerate(zip(pieces, raw)) if any(f in text or f in (piece or "") for f in finals)}
        return known[finals]

    def run(self, token_lists: list[list[int]], sampling: Sampling) -> Iterator[Completion]:
        torch = self.torch
        model = self.model
        seeds = sampling.request_seeds(len(token_lists))
        generators: dict[int, Any] = {}  # prompt index -> its own generator, while it holds a slot
        stop_tokens = self._stop_candidates(sampling)
        longest_stop = max((len(s) for s in sampling.stop), default=0)

        prefix = None
        if self.prefix_cache and len(token_lists) > 1:
            shared = min(_common_prefix_length(token_lists), min(len(t) for t in token_lists) - 1)
            if shared >= MIN_PREFIX_TOKENS:
                prefix = model.compute_prefix(token_lists[0][:shared])
        start = prefix.length if prefix is not None else 0

        queue = sorted(range(len(token_lists)), key=lambda i: -len(token_lists[i]))
        slots = min(self.batch_size, len(token_lists))
        longest = max(len(t) for t in token_lists) - start
        cache = _SlotCache(len(model.layers), slots, model.kv_heads, model.head_dim, longest + 1, model.dtype, self.device)
        owner = [-1] * slots  # prompt index held by each slot, -1 when free
        generated: dict[int, list[int]] = {}
        logprobs: dict[int, list[float]] = {}
        last_token = torch.zeros(slots, dtype=torch.long, device=self.device)
        refill_at = max(1, slots // 8)

        def accept(slot: int, token: int, logprob: float | None) -> Completion | None:
            """Append ``token`` to the slot's output; return its Completion when it is done."""
            index = owner[slot]
            out = generated[index]
            out.append(token)
            if logprob is not None:
                logprobs[index].append(logprob)
            reason = None
            if token in self.eos_ids:
                reason = "eos"
            elif token in stop_tokens:
                tail = self.tokenizer.decode(out[-(longest_stop + 8) :], skip_special_tokens=True)
                if any(s in tail for s in sampling.stop):
                    reason = "stop"
            if reason is None and len(out) >= sampling.max_new_tokens:
                reason = "length"
            if reason is None:
                return None
            owner[slot] = -1
            del generated[index]
            generators.pop(index, None)
            text, _ = cut_at_stop(self.tokenizer.decode(out, skip_special_tokens=True), sampling.stop)
            return Completion(
                index=index,
                text=text,
                tokens=len(out),
                prompt_tokens=len(token_lists[index]),
                finish_reason=reason,
                token_ids=out,
                logprobs=logprobs.pop(index) if sampling.logprobs else None,
            )

        while queue or any(o >= 0 for o in owner):
            free = [s for s, o in enumerate(owner) if o < 0]
            active = len(owner) - len(free)
            if queue and free and (len(free) >= refill_at or active == 0):
                chosen = [queue.pop(0) for _ in free[: len(queue)]]
                for group_slots, group in _prefill_groups(free, chosen, token_lists, start):
                    for slot, i in zip(group_slots, group):
                        owner[slot] = i
                        generated[i] = []
                        logprobs[i] = []
                        if not sampling.greedy:
                            generators[i] = request_generators([seeds[i]])[0]
                    logits = self._prefill(cache, group_slots, group, token_lists, start, prefix)
                    first, first_logprobs = self._choose(logits, sampling, [generators.get(i) for i in group])
                    last_token[group_slots] = first
                    for row, (slot, token) in enumerate(zip(group_slots, first.tolist())):
                        done = accept(slot, token, first_logprobs[row] if first_logprobs is not None else None)
                        if done is not None:
                            yield done
                continue
            if active == 0:
                continue
            if not queue and active <= 3 * len(owner) // 4:
                keep = [s for s, o in enumerate(owner) if o >= 0]
                rows = torch.tensor(keep, device=self.device)
                cache.keep(rows)
                last_token = last_token.index_select(0, rows)
                owner = [owner[s] for s in keep]
            else:
                # Free slots still run (their output is ignored); keep them at position 0.
                idle = torch.tensor([o < 0 for o in owner], device=self.device)
                cache.lengths.masked_fill_(idle, 0)
            cache.ensure_capacity(int(cache.lengths.max()) + 1)
            row_generators = [generators.get(o) for o in owner]  # None for a free slot: it draws nothing
            tokens, step_logprobs = self._choose(model.decode(cache, last_token, prefix), sampling, row_generators)
            last_token = tokens
            for slot, token in enumerate(tokens.tolist()):
                if owner[slot] >= 0:
                    done = accept(slot, token, step_logprobs[slot] if step_logprobs is not None else None)
                    if done is not None:
                        yield done


def _common_prefix_length(token_lists: list[list[int]]) -> int:
    first = token_lists[0]
    length = len(first)
    for tokens in token_lists[1:]:
        limit = min(length, len(tokens))
        i = 0
        while i < limit and tokens[i] == first[i]:
            i += 1
        length = i
        if length == 0:
            break
    return length


def _prefill_groups(slots: list[int], prompts: list[int], token_lists, start: int):
    """Split (slot, prompt) pairs into prefill passes of at most PREFILL_TOKEN_BUDGET padded tokens."""
    group_slots, group = [], []
    width = 0
    for slot, index in zip(slots, prompts):
        length = len(token_lists[index]) - start
        if group and max(width, length) * (len(group) + 1) > PREFILL_TOKEN_BUDGET:
            yield group_slots, group
            group_slots, group, width = [], [], 0
        group_slots.append(slot)
        group.append(index)
        width = max(width, length)
    if group:
        yield group_slots, group

