"""LoRA export benchmark: does llama.cpp apply an exported adapter as transformers + peft do?

For random LoRA adapters on SmolLM2-135M (the base transformers dequantises from the embedded
GGUF file), each exported with :func:`podium.train.export.lora_to_gguf`, it compares the change
of the logits the adapter causes in both runtimes (:func:`podium.train.export.logit_agreement`)
on one GSM8K-style text, every position. Two adapter families, because they test different
parts of the export: the query/key projections (the llama row reordering) and the other
linear layers (orientation and alpha / r scaling). ``lora_B`` is drawn N(0, scale²) so the effect
stands out of llama.cpp's activation-quantisation noise.

Controls, which a correct check must tell apart from the export:

* ``no-reorder``: the query/key ``lora_B`` rows left in transformers' order;
* ``alpha x2``: the GGUF written with twice the adapter's alpha (a scaling bug);
* ``other adapter``: the export of a differently seeded adapter.

    .venv/bin/python bench/lora_agreement.py [--seeds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from podium.train import export

BASE = "smollm2-135m-instruct"
TEXT = "Question: Janet has 3 apples and buys 5 more. How many apples does she have? Answer:"
FAMILIES = {
    "q,k": (["q_proj", "k_proj"], 0.3),
    "v,o,gate,up,down": (["v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], 0.1),
}


def make_adapter(model: Any, targets: list[str], scale: float, seed: int, out: Path) -> None:
    """A random peft LoRA (r = 8, alpha = 16) on ``targets``, lora_B ~ N(0, scale²), saved to
    ``out``; ``model`` is left without it."""
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    peft = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=targets))
    with torch.no_grad():
        for name, param in peft.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, scale)
    peft.save_pretrained(str(out))
    peft.unload()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    model = export.load_base_model(BASE)
    loaded = time.perf_counter() - started
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for family, (targets, scale) in FAMILIES.items():
            for seed in range(args.seeds):
                adapter, other = root / f"a{seed}", root / f"o{seed}"
                make_adapter(model, targets, scale, seed, adapter)
                make_adapter(model, targets, scale, seed + 1000, other)
                t0 = time.perf_counter()
                export.lora_to_gguf(adapter, BASE, root / "ok.gguf")
                export_s = time.perf_counter() - t0
                export.lora_to_gguf(other, BASE, root / "other.gguf")
                doubled = root / "doubled"
                shutil.copytree(adapter, doubled, dirs_exist_ok=True)
                config = json.loads((doubled / "adapter_config.json").read_text())
                config["lora_alpha"] *= 2
                (doubled / "adapter_config.json").write_text(json.dumps(config))
                export.lora_to_gguf(doubled, BASE, root / "alpha2.gguf")
                real = export._rope_permute
                export._rope_permute = lambda rows, heads: rows
                try:
                    export.lora_to_gguf(adapter, BASE, root / "noreorder.gguf")
                finally:
                    export._rope_permute = real
                for label, file in (("export", "ok"), ("no-reorder", "noreorder"), ("alpha x2", "alpha2"),
                                    ("other adapter", "other")):  # fmt: skip
                    if label == "no-reorder" and family != "q,k":
                        continue
                    a = export.logit_agreement(adapter, BASE, root / f"{file}.gguf", TEXT, model=model)
                    rows.append({"family": family, "scale": scale, "seed": seed, "variant": label,
                                 "cosine": a.cosine, "norm_ratio": a.norm_ratio, "signal": a.signal,
                                 "positions": a.positions, "export_s": export_s})  # fmt: skip
    if args.json:
        print(json.dumps({"load_s": loaded, "rows": rows}, indent=1))
        return
    print(f"transformers load of {BASE}: {loaded:.1f} s; text: {rows[0]['positions']} tokens")
    print(f"{'adapter':<18} {'variant':<14} {'seed':>4} {'cosine':>8} {'norm ratio':>10} {'signal':>7}")
    for r in rows:
        print(
            f"{r['family']:<18} {r['variant']:<14} {r['seed']:>4} {r['cosine']:>8.4f} "
            f"{r['norm_ratio']:>10.3f} {r['signal']:>7.1f}"
        )


if __name__ == "__main__":
    main()
