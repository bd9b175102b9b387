-- catches: cancelled or refunded orders counted as sales
INSERT INTO orders VALUES (93, 10, '2024-04-27', 'cancelled');
INSERT INTO order_items VALUES (93, 6, 3, NULL);
INSERT INTO orders VALUES (94, 9, '2024-04-27', 'refunded');
INSERT INTO order_items VALUES (94, 9, 2, NULL);
