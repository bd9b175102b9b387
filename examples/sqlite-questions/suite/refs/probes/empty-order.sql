-- catches: an order without lines dropped or miscounted (an inner join to order_items, or COUNT(*) after a LEFT JOIN)
INSERT INTO orders VALUES (95, 6, '2024-04-26', 'paid');
