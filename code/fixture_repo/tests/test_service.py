from shop.models import Customer, Item
from shop.service import order_total


def test_order_total_applies_tax():
    assert order_total([Item("pen", 2.0, 3)], Customer("ada")) == 7.2
