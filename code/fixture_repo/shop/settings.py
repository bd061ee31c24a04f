"""Shop-wide defaults."""

CURRENCY = "EUR"
TAX_RATE = 0.2
MEMBER_DISCOUNT = 0.1
