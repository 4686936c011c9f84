"""Rendered change-history docs: the render model, text escaping, charts, the templates' views,
and a bisect's conclusion in words (stored with the bisect, shown by `bisect`, `show`, `render`)."""
