#!/usr/bin/env python3
"""Rewrites docs/cli.md's generated reference blocks (each between "<!-- kernelgate help
--markdown: PATH -->" and "<!-- end -->") with what `kernelgate help --markdown` prints now; the
prose around them is kept. ctest cli_help.docs_carry_each_commands_generated_reference_... fails
until this is run after a change to an option.

    python3 scripts/cli_docs.py build/suite/kernelgate [docs/cli.md]
"""
import re
import subprocess
import sys

kernelgate = sys.argv[1]
doc_file = sys.argv[2] if len(sys.argv) > 2 else "docs/cli.md"
generated = subprocess.run([kernelgate, "help", "--markdown"], capture_output=True, text=True,
                           check=True).stdout
block = re.compile(r"<!-- kernelgate help --markdown: (.*?) -->\n.*?<!-- end -->\n", re.S)
fresh = {m.group(1): m.group(0) for m in block.finditer(generated)}
doc = open(doc_file).read()
seen = set()


def replace(m):
    seen.add(m.group(1))
    if m.group(1) not in fresh:
        sys.exit(f"{doc_file}: no command '{m.group(1)}' any more; remove its section")
    return fresh[m.group(1)]


doc = block.sub(replace, doc)
for path in fresh:
    if path not in seen:
        print(f"{doc_file}: add a section for '{path}' with this block:\n{fresh[path]}")
open(doc_file, "w").write(doc)
