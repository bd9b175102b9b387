-- catches: arithmetic on a NULL discount, which makes the line's amount NULL
INSERT INTO orders VALUES (96, 10, '2024-04-29', 'paid');
INSERT INTO order_items VALUES (96, 12, 1, NULL);
