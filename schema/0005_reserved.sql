-- 0005_reserved: a version number held for another change to the schema;
-- it changes nothing, so that the numbers stay without a gap.
SELECT 1;
