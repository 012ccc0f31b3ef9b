"""Print the text outputs of built notebooks (a quick look without a browser): python chapters/show.py 7.1"""
import sys
from pathlib import Path

import nbformat

for arg in sys.argv[1:]:
    for path in sorted(Path(__file__).parent.glob(f"{arg}*.ipynb")):
        print(f"===== {path.name}")
        for c in nbformat.read(path, 4).cells:
            if c.cell_type != "code":
                continue
            mark = "CHECK " if "NBVAL_CHECK_OUTPUT" in c.source else ""
            for o in c.outputs:
                if o.output_type == "stream":
                    print(f"--- {mark}{o.name}\n{o.text[:2000]}")
                elif o.output_type == "error":
                    print(f"--- ERROR {o.ename}: {o.evalue}")
                else:
                    print(f"--- {o.output_type} {list(o.get('data', {}))}")
