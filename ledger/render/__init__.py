"""Rendered change-history docs: the render model, text escaping, charts, the templates' views."""
