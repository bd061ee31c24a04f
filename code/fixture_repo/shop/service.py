"""Order arithmetic."""

from shop.models import Customer, Item
from shop.settings import MEMBER_DISCOUNT, TAX_RATE


def subtotal(items: list[Item]) -> float:
    """Sum of line prices before tax and discounts."""
    return sum(item.cost * item.quantity for item in items)


def order_total(items: list[Item], customer: Customer) -> float:
    """What the customer pays: subtotal, minus the member discount, plus tax."""
    amount = subtotal(items)
    if customer.member:
        amount *= 1 - MEMBER_DISCOUNT
    return round(amount * (1 + TAX_RATE), 2)
