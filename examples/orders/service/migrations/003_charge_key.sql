-- The Idempotency-Key of each order's charge at billing: random, so nobody can
-- guess it from the order's sequential id, and the same for every retry of
-- the charge, because it lives on the order.
ALTER TABLE orders ADD COLUMN charge_key text NOT NULL DEFAULT gen_random_uuid()::text;
---- create above / drop below ----
ALTER TABLE orders DROP COLUMN charge_key;
