"""Records the shop works with."""

from dataclasses import dataclass


@dataclass
class Item:
    """One line of an order."""

    name: str
    price: float
    quantity: int = 1


@dataclass
class Customer:
    """Who placed the order, and whether they get the member discount."""

    name: str
    member: bool = False
