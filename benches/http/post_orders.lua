-- wrk script for scripts/bench-serve: every request creates an order (POST /v1/orders).
-- The body names no merchant_order_id, so the server generates a unique one per order
-- and the same body can be sent every time. The API key comes from $COINORDER_KEY:
--   COINORDER_KEY=test_... wrk -c 16 -d 5s -s benches/http/post_orders.lua http://ADDR/v1/orders
local key = os.getenv("COINORDER_KEY")
if key == nil or key == "" then
    error("set COINORDER_KEY to a sandbox API key")
end
wrk.method = "POST"
wrk.body = '{"currency":"USD","amount":"10.00"}'
wrk.headers["content-type"] = "application/json"
wrk.headers["x-api-key"] = key
