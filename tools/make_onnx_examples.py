"""Write the example ONNX models shipped in gpuplace/examples/onnx/ (each under 1 MB).

They are real `torch.onnx.export` output (opset 20, eval mode, so BatchNormalization is folded
into Conv), so their node names carry PyTorch module paths (`/model/layers.0/fc/Gemm`) and their
initializers are state_dict names (`model.layers.0.fc.weight`), as a user's export has them. The
batch (and sequence) dimensions are symbolic: bind them with `--dim batch=N`.

- mlp.onnx: three Linear+ReLU layers and a head (input `x` [batch, 32]).
- cnn.onnx: two Conv+BatchNorm+ReLU+MaxPool stages, global average pooling, a Linear head
  (input `x` [batch, 3, 32, 32]).
- gpt2_tiny.onnx: a GPT-2-like stack of 2 transformer blocks (vocab 256, width 64, 4 heads) with
  the mask-building ops of GPT-2 exports: position ids from the attention mask by CumSum, a
  causal mask from Range and LessOrEqual, masked scores by Where (inputs `input_ids` and
  `attention_mask`, [batch, seq] int64).
- branches.onnx: eight parallel two-layer branches whose first layers all run before any second
  layer (as the export orders them), summed: with `--dim batch=262144` the eight [batch, 512]
  activations alive at once need more than GPU:0 of 4xK520 has under TensorFlow's placement, and
  fit when `--strategy balanced` spreads the branches over the four GPUs.

torch is not a gpuplace dependency: run this under a Python with torch (CPU wheel) and
onnxscript, e.g. `python -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch onnx
onnxscript`, then `/tmp/torchenv/bin/python tools/make_onnx_examples.py [OUT_DIR]` (default
gpuplace/examples/onnx). The output is deterministic for a given torch version (seeded weights).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

OPSET = 20
LIMIT = 1_000_000  # bytes per model


def _models() -> dict[str, tuple[Any, tuple[Any, ...], list[str], dict[str, dict[int, str]]]]:
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, n_in: int, n_out: int) -> None:
            super().__init__()
            self.fc = nn.Linear(n_in, n_out)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.fc(x))

    class Body(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList([Block(32, 128), Block(128, 128), Block(128, 128)])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer in self.layers:
                x = layer(x)
            return x

    class Mlp(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = Body()
            self.head = nn.Linear(128, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.model(x))

    class Stage(nn.Module):
        def __init__(self, n_in: int, n_out: int) -> None:
            super().__init__()
            self.conv = nn.Conv2d(n_in, n_out, 3, padding=1)
            self.bn = nn.BatchNorm2d(n_out)
            self.pool = nn.MaxPool2d(2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.pool(torch.relu(self.bn(self.conv(x))))

    class Cnn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(Stage(3, 16), Stage(16, 32))
            self.classifier = nn.Linear(32, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.features(x)
            x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
            return self.classifier(x)

    width, heads, vocab, positions = 64, 4, 256, 128

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_attn = nn.Linear(width, 3 * width)
            self.c_proj = nn.Linear(width, width)

        def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
            b, t, _ = x.shape
            q, k, v = self.c_attn(x).split(width, dim=2)
            q, k, v = (a.view(b, t, heads, width // heads).transpose(1, 2) for a in (q, k, v))
            scores = q @ k.transpose(-2, -1) / (width // heads) ** 0.5
            scores = torch.where(keep, scores, torch.finfo(scores.dtype).min)
            y = torch.softmax(scores, dim=-1) @ v
            return self.c_proj(y.transpose(1, 2).reshape(b, t, width))

    class Mlp4(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_fc = nn.Linear(width, 4 * width)
            self.c_proj = nn.Linear(4 * width, width)
            self.act = nn.GELU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.c_proj(self.act(self.c_fc(x)))

    class Gpt2Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(width)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(width)
            self.mlp = Mlp4()

        def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
            x = x + self.attn(self.ln_1(x), keep)
            return x + self.mlp(self.ln_2(x))

    class Transformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(vocab, width)
            self.wpe = nn.Embedding(positions, width)
            self.h = nn.ModuleList([Gpt2Block(), Gpt2Block()])
            self.ln_f = nn.LayerNorm(width)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            t = input_ids.shape[1]
            position_ids = attention_mask.cumsum(-1) - 1
            position_ids = position_ids.masked_fill(attention_mask == 0, 1)
            idx = torch.arange(t, device=input_ids.device)
            causal = idx[None, :] <= idx[:, None]  # [t, t]
            padded = (attention_mask == 0)[:, None, None, :]  # [b, 1, 1, t]
            keep = causal[None, None, :, :] & ~padded
            x = self.wte(input_ids) + self.wpe(position_ids)
            for block in self.h:
                x = block(x, keep)
            return self.ln_f(x)

    class Gpt2(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = Transformer()
            self.lm_head = nn.Linear(width, vocab, bias=False)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.lm_head(self.transformer(input_ids, attention_mask))

    class Up(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(16, 512)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.fc(x))

    class Branches(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up = nn.ModuleList([Up() for _ in range(8)])
            self.down = nn.ModuleList([nn.Linear(512, 8) for _ in range(8)])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            hidden = [up(x) for up in self.up]  # all eight alive at once
            outs = [down(h) for down, h in zip(self.down, hidden, strict=True)]
            return torch.stack(outs).sum(0)

    batch = {0: "batch"}
    seq = {0: "batch", 1: "seq"}
    ids = torch.randint(0, vocab, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.int64)
    return {
        "mlp": (Mlp(), (torch.randn(4, 32),), ["x"], {"x": batch, "logits": batch}),
        "cnn": (Cnn(), (torch.randn(4, 3, 32, 32),), ["x"], {"x": batch, "logits": batch}),
        "gpt2_tiny": (Gpt2(), (ids, mask), ["input_ids", "attention_mask"],
                      {"input_ids": seq, "attention_mask": seq, "logits": seq}),
        "branches": (Branches(), (torch.randn(4, 16),), ["x"], {"x": batch, "logits": batch}),
    }  # fmt: skip


def _export(model: Any, args: tuple[Any, ...], inputs: list[str],
            dynamic: dict[str, dict[int, str]], path: Path) -> None:  # fmt: skip
    import torch

    model.eval()
    with torch.no_grad(), tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, path.name)
        torch.onnx.export(
            model, args, out, input_names=inputs, output_names=["logits"],
            dynamic_axes=dynamic, opset_version=OPSET, dynamo=False, do_constant_folding=True,
        )  # fmt: skip
        data = Path(out).read_bytes()
    if len(data) >= LIMIT:
        raise SystemExit(f"{path.name}: {len(data):,} bytes, over the {LIMIT:,} allowed")
    tmp_path = path.with_name(f".{path.name}.tmp")
    tmp_path.write_bytes(data)
    os.replace(tmp_path, path)
    print(f"wrote {path} ({len(data):,} bytes)")


def main(argv: list[str]) -> int:
    import warnings

    import torch

    out = Path(argv[0] if argv else Path(__file__).parent.parent / "gpuplace" / "examples" / "onnx")
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    warnings.filterwarnings("ignore")  # the TorchScript exporter's deprecation notice
    for name, (model, args, inputs, dynamic) in _models().items():
        _export(model, args, inputs, dynamic, out / f"{name}.onnx")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
