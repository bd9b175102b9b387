-- catches: grouping by name instead of by id (two customers share a name)
INSERT INTO customers VALUES (92, 'Mei Lin', 'Oslo', '2024-04-01');
INSERT INTO orders VALUES (92, 92, '2024-04-29', 'shipped');
INSERT INTO order_items VALUES (92, 9, 1, NULL);
