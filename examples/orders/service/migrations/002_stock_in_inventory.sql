-- How many items are available is examples/inventory's to say (GetStock,
-- Reserve over gRPC); orders keeps its catalogue: the price of each SKU.
ALTER TABLE stock DROP COLUMN available;
---- create above / drop below ----
ALTER TABLE stock ADD COLUMN available integer NOT NULL DEFAULT 0 CHECK (available >= 0);
