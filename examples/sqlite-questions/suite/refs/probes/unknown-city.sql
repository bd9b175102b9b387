-- catches: a comparison or join on city that loses customers whose city is NULL
INSERT INTO customers VALUES (97, 'Yusuf Demir', NULL, '2024-04-02');
INSERT INTO orders VALUES (97, 97, '2024-04-29', 'shipped');
INSERT INTO order_items VALUES (97, 1, 1, NULL);
