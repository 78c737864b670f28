"""`compile`: per method of --methods, the training step time with the encoder compiled (regional torch.compile,
--compile-backend) against the eager step on the same batches, interleaved after a warm-up round; also the
compile time (the first compiled round minus a steady one), the number of compilations and recompilations. A
method whose model does not compile keeps its eager time and the error."""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
import torch

from bench.data.batching import auto_bucket, length_grouped_batches
from benchmarks.common import device_name, one_line, prepare, rotated, round_line, say, sync, unique_graphs


def compile_bench(args: argparse.Namespace) -> dict:
    """Per method of --methods: the training step time eager vs with the encoder compiled (regional
    compile, --compile-backend) on the same batches, interleaved after a warm-up round; the compile time
    (first compiled round minus a steady one), the number of compilations and the speed-up."""
    device = torch.device(args.device)
    bucket = args.length_bucket if args.length_bucket is not None else auto_bucket(device.type, True)
    report: dict[str, Any] = {"benchmark": "compile", "device": args.device, "device_name": device_name(device),
                              "encoder": args.encoder, "dataset": args.dataset, "batch_size": args.batch_size,
                              "max_length": args.max_length, "steps": args.steps, "rounds": args.rounds,
                              "precision": args.precision, "backend": args.compile_backend,
                              "length_bucket": bucket, "torch_threads": torch.get_num_threads(), "methods": {}}
    for name in args.method_list:
        report["methods"][name] = compile_one(args, name, bucket)
    return report


def compile_one(args: argparse.Namespace, name: str, bucket: int) -> dict:
    """`compile` for one method; a method that cannot be compiled gets its eager time and the error."""
    import torch._dynamo

    eager, data, cfg, _ = prepare(args, name, bucket=bucket, compile=False)
    rng = np.random.default_rng([0, 0])
    batches = [eager.batch(data, index, training=True)
               for index in length_grouped_batches(data.lengths, cfg.batch_size, rng)]
    trainers = {"eager": (eager, eager.optimizer())}
    entry: dict[str, Any] = {"steps_per_round": len(batches),
                             "batch_widths": sorted({int(b["input_ids"].shape[1]) for b in batches})}

    def run(variant: str) -> float | None:
        """Seconds of one pass over the batches; None (and the error noted) when the compiled variant fails."""
        trainer, optimizer = trainers[variant]
        trainer.method.train()
        start = time.perf_counter()
        try:
            for batch in batches:
                trainer.step(batch, optimizer)
            sync(trainer.device)
        except Exception as exc:  # the method's model does not compile: say why, go on with eager alone
            if variant == "eager":
                raise
            entry["error"] = one_line(exc)
            trainers.pop(variant)
            say(args, f"{name}: not compiled: {entry['error']}")
            return None
        return time.perf_counter() - start

    torch._dynamo.reset()  # a cold start: compile time and compilations of this method alone
    before = unique_graphs()
    try:
        compiled, _, _, how = prepare(args, name, bucket=bucket, compile=True)
        trainers["compiled"] = (compiled, compiled.optimizer())
        entry["compiled"] = how
    except Exception as exc:
        entry["error"] = one_line(exc)
        say(args, f"{name}: not compiled: {entry['error']}")
    first_seconds = run("compiled") if "compiled" in trainers else None  # compiles
    if first_seconds is not None:
        entry["compilations_first_round"] = unique_graphs() - before
        say(args, f"{name}: first compiled round {first_seconds:.3g} s ({entry['compilations_first_round']} graphs)")
    run("eager")  # warm-up
    times: dict[str, list[float]] = {"eager": [], "compiled": []}
    for round_ in range(1, args.rounds + 1):
        step = {}
        for variant in rotated(list(trainers), round_):
            seconds = run(variant)
            if seconds is not None:
                step[variant] = seconds / len(batches)
                times[variant].append(step[variant])
        say(args, f"{name} " + round_line(round_, args.rounds, step, "s/step"))
    eager_step = statistics.median(times["eager"])
    entry["eager_step_seconds"] = round(eager_step, 5)
    if "compiled" in trainers:
        compiled_step = statistics.median(times["compiled"])
        entry.update(compiled_step_seconds=round(compiled_step, 5), speedup=round(eager_step / compiled_step, 3),
                     compile_seconds=round(first_seconds - compiled_step * len(batches), 2),
                     compilations=unique_graphs() - before)
        entry["recompilations_after_first_round"] = entry["compilations"] - entry["compilations_first_round"]
    else:
        times.pop("compiled")
    entry["all_rounds"] = {k: [round(x, 5) for x in v] for k, v in times.items()}
    return entry
