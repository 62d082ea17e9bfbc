-- An invoice belongs to the customer whose order it bills (the subject of the
-- token orders forwards): only that customer reads it.
ALTER TABLE invoices ADD COLUMN customer text;
UPDATE invoices SET customer = p.payer FROM payments p WHERE p.invoice_id = invoices.id;
UPDATE invoices SET customer = '' WHERE customer IS NULL;
ALTER TABLE invoices ALTER COLUMN customer SET NOT NULL;
---- create above / drop below ----
ALTER TABLE invoices DROP COLUMN customer;
