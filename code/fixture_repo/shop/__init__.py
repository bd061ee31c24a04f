"""tiny-shop: items, prices and order totals."""
