"""SASS instruction mix of a built kernel (cuobjdump -sass), summarized for the judge and the store."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)(?:\.[\w.]+)?")
CATEGORIES = {
    "fp32": ("FADD", "FMUL", "FFMA", "FMNMX", "FSETP", "FSEL", "MUFU", "FCHK", "FRND"),
    "fp16_tensor": ("HMMA", "HFMA2", "HADD2", "HMUL2", "IMMA", "DMMA", "HGMMA", "QGMMA", "F2FP"),
    "global_memory": ("LDG", "STG", "LD", "ST", "RED", "ATOM", "LDGSTS", "UTMALDG"),
    "shared_memory": ("LDS", "STS", "LDSM", "ATOMS"),
    "local_memory_spills": ("LDL", "STL"),
    "integer": ("IADD3", "IMAD", "LOP3", "SHF", "ISETP", "LEA", "IABS", "IMNMX", "SEL", "PRMT", "IADD"),
    "control": ("BRA", "EXIT", "BAR", "BSYNC", "BSSY", "RET", "CALL", "WARPSYNC", "NOP"),
}


def parse_sass(text: str) -> dict[str, Any]:
    """Opcode counts by category, and the most frequent opcodes."""
    opcodes = Counter(match.group(1) for match in _INSTRUCTION.finditer(text))
    categories = {name: sum(opcodes[o] for o in members) for name, members in CATEGORIES.items()}
    categories["other"] = sum(opcodes.values()) - sum(categories.values())
    return {"instructions": sum(opcodes.values()), "categories": categories, "top": opcodes.most_common(8)}


def sass_mix(binary: Path) -> dict[str, Any]:
    tool = shutil.which("cuobjdump")
    if tool is None:
        return {"error": "cuobjdump is not on PATH"}
    done = subprocess.run([tool, "-sass", str(binary)], capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or "/*0000*/" not in done.stdout:
        return {"error": f"cuobjdump found no SASS in {binary.name}: {done.stderr.strip()[:200]}"}
    return parse_sass(done.stdout)
