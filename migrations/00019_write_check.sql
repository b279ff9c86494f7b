-- +goose Up
-- write_check refuses a write sent in one round trip (domain.QueueWriteChecks) when one of its
-- checks did not pass: it raises SQLSTATE RW001, which ends the batch's implicit transaction
-- before the write's own statements, and which nothing else raises. refusal names the check.
-- +goose StatementBegin
CREATE FUNCTION write_check(passed boolean, refusal text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF passed IS NOT TRUE THEN
        RAISE EXCEPTION 'write refused: %', refusal USING ERRCODE = 'RW001';
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION write_check(boolean, text);
