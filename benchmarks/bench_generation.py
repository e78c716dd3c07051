"""Generation throughput of tomrl's HF engine against plain ``model.generate``, side by side.

    TOMRL_HOME=... .venv/bin/python benchmarks/bench_generation.py            # about 2-3 minutes on 2 cores
    .venv/bin/python benchmarks/bench_generation.py --prompts 128 --new-tokens 256 --repeat 2

Workload: the embedded SmolLM2-135M-Instruct on Paper A prompts (the ``paper_a`` prompt of the
ToMi evaluation set when the shared data is present, else tomrl-generated Hi-ToM order-1
questions), greedy, every prompt generating exactly ``--new-tokens`` tokens (EOS ignored, no stop
string; the fixed-output-length method of vLLM's throughput benchmark, so every engine does the
same work and produces the same number of tokens).

Measured, in one process, one after another (``--repeat`` interleaves the rounds; the best round
of each counts, as the machine is shared and timings are noisy):

1. plain ``model.generate``, one prompt at a time, float32 (the model's stored dtype: what
   ``AutoModelForCausalLM.from_pretrained`` gives);
2. plain ``model.generate``, batches of 8 (left padding), float32;
3. plain ``model.generate``, batches of 8, bfloat16 (to show how much of the gain is the dtype);
4. tomrl's ``HFEngine`` (slots path: continuous batching, shared-prefix cache, bf16 where the CPU
   supports it), batch ``--batch-size``.

With ``--compare-decoders`` it measures instead, side by side in one process and all in float32
with greedy decoding and EOS ignored, the three continuous/static batching decoders a tomrl run
could use (the measurement quoted in :mod:`tomrl.generation.slots`):

    .venv/bin/python benchmarks/bench_generation.py --compare-decoders --prompts 16 --new-tokens 128 --threads 2

a. tomrl's ``SlotGenerator`` (batch = all prompts, shared-prefix cache);
b. ``model.generate`` on one left-padded batch of all prompts;
c. transformers' continuous batching, ``model.generate_batch`` (what TRL's
   ``use_transformers_paged`` runs), with its default settings.

With ``--profile`` it explains what bounds tomrl's engine instead: the same run of the engine
under ``torch.profiler`` (time per operator kind), the float32 matmul rate this CPU reaches at the
decode step's shapes (measured, one weight matrix of each kind), and from it the roofline: the
tokens/s the engine would reach if every decode step were nothing but its weight matmuls.

    .venv/bin/python benchmarks/bench_generation.py --profile

On a CPU without fast bf16 (no AMX / AVX512-BF16, where ``precision: auto`` picks float32) the
plain bf16 baseline is skipped: bf16 is emulated there and that run alone would take most of an hour.

The plain baselines run on the first ``--baseline-prompts`` prompts (default 8): their cost per
prompt does not depend on how many prompts follow, and one-at-a-time decoding of all of them would
take most of the time budget. tomrl's engine runs on all ``--prompts`` prompts, because filling a
large batch is how it gets its speed. Tokens/s = generated tokens / wall seconds, prefill included.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

TARGET_RATIO = 8.0
TARGET_TOKENS_PER_S = 600.0


def build_prompts(count: int, tokenizer) -> tuple[list[str], str]:
    from tomrl.evaluation.benchmarks import BENCHMARKS, DataMissing, load_examples
    from tomrl.prompts import PromptConfig, render_prompt

    try:
        benchmark = BENCHMARKS["tomi"]
        examples = load_examples(benchmark, {}, 0, 0)[:count]
        source = "ToMi (Paper A's test set)"
    except DataMissing:
        benchmark = BENCHMARKS["tomrl-hitom-order1"]
        examples = load_examples(benchmark, {}, count, 0)
        source = "tomrl-generated Hi-ToM order 1"
    prompt = benchmark.prompt_for(PromptConfig("paper_a"))
    prompts = [render_prompt(e, tokenizer, prompt) for e in examples]
    return prompts, source


def plain_generate(model, tokenizer, prompts: list[str], batch_size: int, new_tokens: int) -> tuple[int, float, float, list[str]]:
    """``model.generate`` on left-padded batches; returns (generated tokens, wall s, CPU s, texts)."""
    import torch

    tokenizer.padding_side = "left"
    tokens, texts = 0, []
    started, cpu_started = time.perf_counter(), time.process_time()
    with torch.inference_mode():
        for start in range(0, len(prompts), batch_size):
            batch = tokenizer(prompts[start : start + batch_size], return_tensors="pt", padding=True, add_special_tokens=False)
            output = model.generate(
                **batch, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id
            )
            new = output[:, batch["input_ids"].shape[1] :]
            tokens += new.numel()
            texts += tokenizer.batch_decode(new, skip_special_tokens=True)
    return tokens, time.perf_counter() - started, time.process_time() - cpu_started, texts


def tomrl_generate(engine, prompts: list[str], new_tokens: int) -> tuple[int, float, float, list[str]]:
    from tomrl.generation.base import Sampling

    sampling = Sampling(temperature=0, max_new_tokens=new_tokens, stop=(), ignore_eos=True)
    started, cpu_started = time.perf_counter(), time.process_time()
    done = list(engine.generate(prompts, sampling))
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    done.sort(key=lambda c: c.index)
    return sum(c.tokens for c in done), seconds, cpu_seconds, [c.text for c in done]


def compare_decoders(path: str, prompts: list[str], tokenizer, new_tokens: int, repeat: int) -> None:
    """Side by side, float32, greedy, EOS ignored: SlotGenerator, batched model.generate, model.generate_batch."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    from tomrl.generation import Sampling, SlotGenerator, SlotModel, eos_token_ids

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    token_lists = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    eos_ids = eos_token_ids(model, tokenizer)
    slot_model = SlotModel(model)

    def slots(lists, new_tokens):
        sampling = Sampling(temperature=0, max_new_tokens=new_tokens, stop=(), ignore_eos=True)
        with torch.inference_mode():
            done = sorted(SlotGenerator(slot_model, tokenizer, eos_ids, len(lists)).run(lists, sampling), key=lambda c: c.index)
        return [c.token_ids for c in done]

    def plain(lists, new_tokens):
        from tomrl.generation import left_padded

        ids, mask = left_padded(lists, tokenizer.pad_token_id)
        with torch.inference_mode():
            output = model.generate(
                input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
            )
        return output[:, ids.shape[1] :].tolist()

    def paged(lists, new_tokens):
        # eos_token_id=-1: no EOS (transformers' continuous batching has no min_new_tokens). Not under
        # inference_mode: generate_batch decodes in a thread of its own, and tensors made in
        # inference mode cannot be updated in place outside it.
        config = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, eos_token_id=-1, pad_token_id=tokenizer.pad_token_id)
        outputs = model.generate_batch(lists, generation_config=config, progress_bar=False)
        return [output.generated_tokens for output in outputs.values()]

    runs = {"a. tomrl SlotGenerator": slots, "b. model.generate, one batch": plain, "c. model.generate_batch (paged CB)": paged}
    for run in runs.values():  # warm-up (first-call allocations, kernel selection), untimed
        run(token_lists[:2], 4)
    best: dict[str, tuple[float, list]] = {}
    for round_number in range(repeat):
        for name, run in runs.items():
            started = time.perf_counter()
            ids = run(token_lists, new_tokens)
            seconds = time.perf_counter() - started
            tokens = sum(len(row) for row in ids)
            print(f"  round {round_number + 1}: {name}: {tokens} tokens in {seconds:.1f} s = {tokens / seconds:.1f} tokens/s", flush=True)
            if name not in best or seconds < best[name][0]:
                best[name] = (seconds, ids)
    slots_name = next(iter(runs))
    print()
    for name, (seconds, ids) in best.items():
        tokens = sum(len(row) for row in ids)
        same = sum(a == b for a, b in zip(ids, best[slots_name][1]))
        print(
            f"{name:<36} {tokens / seconds:>8.1f} tokens/s  {best[slots_name][0] and seconds / best[slots_name][0]:>5.2f}x the slots time  "
            f"identical token ids to slots: {same}/{len(ids)}"
        )


def profile_engine(engine, prompts: list[str], prompt_lengths: list[int], new_tokens: int) -> None:
    """What bounds the engine: its operators' share of the time, and the matmul roofline of a decode step."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    tomrl_generate(engine, prompts[:2], 4)  # warm-up, untimed
    tokens, seconds, _, _ = tomrl_generate(engine, prompts, new_tokens)
    rate = tokens / seconds
    print(f"engine: {tokens} tokens in {seconds:.1f} s = {rate:.1f} tokens/s (no profiler)", flush=True)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        tokens, seconds, _, _ = tomrl_generate(engine, prompts, new_tokens)
    totals: dict[str, float] = {}
    for event in prof.key_averages():
        kind = {"aten::mm": "matmul", "aten::addmm": "matmul", "aten::bmm": "matmul", "aten::matmul": None, "aten::linear": None}.get(
            event.key, "softmax / top-p / sampling" if event.key in ("aten::softmax", "aten::_softmax", "aten::sort", "aten::topk", "aten::multinomial") else "other operators"
        )
        if kind:
            totals[kind] = totals.get(kind, 0.0) + event.self_cpu_time_total / 1e6
    profiled = sum(totals.values())
    print(f"profiled run: {tokens} tokens in {seconds:.1f} s (profiler on); operator self-time {profiled:.1f} s:")
    for kind, spent in sorted(totals.items(), key=lambda item: -item[1]):
        print(f"  {kind:<28} {spent:>7.1f} s  {100 * spent / profiled:>5.1f} %")
    # The decode step's weight matmuls at the engine's batch, one of each kind, float32.
    config = engine.model.config
    hidden, inter, vocab = config.hidden_size, config.intermediate_size, config.vocab_size
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    head_dim = hidden // heads
    layer_shapes = [(hidden, (heads + 2 * kv_heads) * head_dim), (heads * head_dim, hidden), (hidden, 2 * inter), (inter, hidden)]
    batch = min(engine.describe().get("batch_size", 64), len(prompts))
    flops_per_token = 2 * (config.num_hidden_layers * sum(k * n for k, n in layer_shapes) + hidden * vocab)
    step_seconds = 0.0
    for k, n, count in [(k, n, config.num_hidden_layers) for k, n in layer_shapes] + [(hidden, vocab, 1)]:
        a, b = torch.randn(batch, k), torch.randn(k, n)
        for _ in range(3):
            torch.mm(a, b)
        started, repeats = time.perf_counter(), 20
        for _ in range(repeats):
            torch.mm(a, b)
        step_seconds += count * (time.perf_counter() - started) / repeats
    flops_per_second = batch * flops_per_token / step_seconds
    token_lists = [engine.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    shared = 0  # the prompts' common prefix is prefilled once (the engine's prefix cache)
    while all(len(ids) > shared for ids in token_lists) and len({ids[shared] for ids in token_lists}) == 1:
        shared += 1
    prefill = shared + sum(prompt_lengths) - shared * len(prompts)
    bound = tokens / ((prefill + tokens) * flops_per_token / flops_per_second)
    print(
        f"decode step at batch {batch}: weight matmuls alone take {1000 * step_seconds:.1f} ms "
        f"({flops_per_second / 1e9:.1f} GFLOP/s float32 on this CPU, {torch.get_num_threads()} threads, "
        f"{flops_per_token / 1e9:.3f} GFLOP per token), so decoding alone cannot exceed {batch / step_seconds:.0f} tokens/s here"
    )
    print(
        f"with prefill ({prefill} prompt tokens: a {shared}-token shared prefix once, then {len(prompts)} prompts' own "
        f"{(prefill - shared) / len(prompts):.0f} each) at the same rate, this workload cannot exceed {bound:.0f} generated tokens/s"
    )
    print(f"the engine's {rate:.0f} tokens/s is {100 * rate / bound:.0f} % of that bound ({100 * rate * step_seconds / batch:.0f} % of the decode-only one)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--prompts", type=int, default=64, help="prompts for tomrl's engine")
    parser.add_argument("--baseline-prompts", type=int, default=8, help="prompts for the plain model.generate baselines")
    parser.add_argument("--new-tokens", type=int, default=128, help="tokens generated per prompt (EOS ignored)")
    parser.add_argument("--batch-size", type=int, default=64, help="tomrl engine batch size")
    parser.add_argument("--repeat", type=int, default=1, help="interleaved rounds; the best round of each engine counts")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument(
        "--compare-decoders", action="store_true", help="compare SlotGenerator, batched generate and generate_batch (float32)"
    )
    parser.add_argument("--profile", action="store_true", help="profile tomrl's engine and print the matmul roofline")
    args = parser.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM

    from tomrl.generation.hf import HFEngine
    from tomrl.models import load_tokenizer, resolve_model

    if args.threads:
        torch.set_num_threads(args.threads)
    path = resolve_model(args.model)
    tokenizer = load_tokenizer(path)
    prompts, source = build_prompts(args.prompts, tokenizer)
    baseline_prompts = prompts[: args.baseline_prompts]
    prompt_lengths = [len(tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    if args.compare_decoders:
        print(
            f"workload: {args.model}, {len(prompts)} prompts from {source} ({sum(prompt_lengths) / len(prompts):.0f} tokens on "
            f"average), {args.new_tokens} new tokens each, greedy, EOS ignored, float32; torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs",
            flush=True,
        )
        compare_decoders(path, prompts, tokenizer, args.new_tokens, args.repeat)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        return 0

    engine = HFEngine(path, batch_size=args.batch_size)
    if args.profile:
        profile_engine(engine, prompts, prompt_lengths, args.new_tokens)
        return 0
    from tomrl.models import cpu_runs_bf16_fast

    bf16_fast, why = cpu_runs_bf16_fast()
    fp32 = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    bf16 = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).eval() if bf16_fast else None
    if not bf16_fast:
        print(f"plain bf16 baseline skipped: {why}")
    print(
        f"workload: {args.model}, {len(prompts)} prompts from {source} (paper_a prompt, {sum(prompt_lengths) / len(prompts):.0f} "
        f"tokens on average), {args.new_tokens} new tokens each, greedy, EOS ignored; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads; tomrl engine: {engine.describe()['path']} path, {engine.describe()['dtype']}",
        flush=True,
    )

    runs = {
        "plain generate, 1 at a time, float32": lambda: plain_generate(fp32, tokenizer, baseline_prompts, 1, args.new_tokens),
        "plain generate, batch 8, float32": lambda: plain_generate(fp32, tokenizer, baseline_prompts, 8, args.new_tokens),
        **({"plain generate, batch 8, bfloat16": lambda: plain_generate(bf16, tokenizer, baseline_prompts, 8, args.new_tokens)} if bf16 else {}),
        f"tomrl hf engine, batch {args.batch_size}, {engine.describe()['dtype']}": lambda: tomrl_generate(engine, prompts, args.new_tokens),
    }
    # Warm-up (first-call allocations, oneDNN kernel selection) on two prompts, untimed.
    plain_generate(fp32, tokenizer, prompts[:2], 2, 4)
    if bf16 is not None:
        plain_generate(bf16, tokenizer, prompts[:2], 2, 4)
    tomrl_generate(engine, prompts[:2], 4)

    load_before = os.getloadavg()
    best: dict[str, tuple[int, float, float, list[str]]] = {}
    for round_number in range(args.repeat):
        for name, run in runs.items():
            tokens, seconds, cpu_seconds, texts = run()
            rate = tokens / seconds
            print(
                f"  round {round_number + 1}: {name}: {tokens} tokens in {seconds:.1f} s = {rate:.1f} tokens/s "
                f"({tokens / cpu_seconds:.1f} per CPU-second)",
                flush=True,
            )
            if name not in best or rate > best[name][0] / best[name][1]:
                best[name] = (tokens, seconds, cpu_seconds, texts)

    load_after = os.getloadavg()
    names = list(runs)
    rates = {name: tokens / seconds for name, (tokens, seconds, _, _) in best.items()}
    one_at_a_time, batch8, ours = names[0], names[1], names[-1]
    batch8_bf16 = names[2] if bf16 is not None else None
    print()
    print(f"{'engine':<44} {'prompts':>7} {'tokens':>7} {'seconds':>8} {'tokens/s':>9} {'x 1-at-a-time':>14} {'tokens/CPU-s':>13}")
    for name in names:
        tokens, seconds, cpu_seconds, _ = best[name]
        prompts_used = len(prompts) if name == ours else len(baseline_prompts)
        print(
            f"{name:<44} {prompts_used:>7} {tokens:>7} {seconds:>8.1f} {rates[name]:>9.1f} "
            f"{rates[name] / rates[one_at_a_time]:>13.1f}x {tokens / cpu_seconds:>13.1f}"
        )
    ratio = rates[ours] / rates[one_at_a_time]
    print()
    print(f"tomrl / plain one-at-a-time (float32): {ratio:.1f}x   (target >= {TARGET_RATIO:.0f}x: {'met' if ratio >= TARGET_RATIO else 'NOT met'})")
    print(f"tomrl / plain batch 8 (float32):       {rates[ours] / rates[batch8]:.1f}x")
    if batch8_bf16:
        print(f"tomrl / plain batch 8 (bfloat16):      {rates[ours] / rates[batch8_bf16]:.1f}x")
    print(
        f"tomrl tokens/s: {rates[ours]:.0f}   (target >= {TARGET_TOKENS_PER_S:.0f}: {'met' if rates[ours] >= TARGET_TOKENS_PER_S else 'NOT met'})"
    )
    # Sanity: greedy outputs of tomrl's engine against plain bf16 generate on the shared prompts
    # (bf16 rounding differs between the two code paths, so near-ties may flip).
    reference = batch8_bf16 if engine.describe()["dtype"] == "bfloat16" and batch8_bf16 else batch8
    ours_texts = best[ours][3][: len(baseline_prompts)]
    same = sum(a == b for a, b in zip(ours_texts, best[reference][3]))
    print(f"identical greedy outputs, tomrl vs {reference}: {same}/{len(baseline_prompts)}")
    print(
        f"machine load average (1 min) before / after: {load_before[0]:.2f} / {load_after[0]:.2f} on {os.cpu_count()} CPUs "
        "(other work on a shared machine slows every engine; compare runs made at low load)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
