-- catches: NOT IN over a column that holds NULL, or guest orders counted as a customer's
INSERT INTO orders VALUES (91, NULL, '2024-04-28', 'shipped');
INSERT INTO order_items VALUES (91, 11, 1, NULL);
