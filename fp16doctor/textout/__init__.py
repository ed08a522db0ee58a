"""Text renderers for the terminal: data in, rich renderables or strings out. Nothing here prints.

One module per area (probe, findings, stacks, diagnose), so each renderer sits beside its twin.
"""
