// coinorder from C++17: RAII over the C ABI. The service, every returned string and every
// error are owned by a std::unique_ptr, so nothing leaks on any path, including a throw.
// The whole flow goes through coinorder_handle, the spec's HTTP API in one call.
//
//   c++ -std=c++17 quickstart.cpp $(pkg-config --cflags --libs coinorder) -o quickstart
//   ./quickstart [DATABASE]          (default: quickstart-cpp.db)
#include <coinorder.h>

#include <cstdint>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

namespace {

struct ServiceDeleter { void operator()(coinorder_service *s) const { coinorder_service_close(s); } };
struct StringDeleter { void operator()(char *s) const { coinorder_string_free(s); } };
struct ErrorDeleter { void operator()(coinorder_error *e) const { coinorder_error_free(e); } };
using Service = std::unique_ptr<coinorder_service, ServiceDeleter>;
using String = std::unique_ptr<char, StringDeleter>;
using Error = std::unique_ptr<coinorder_error, ErrorDeleter>;

// Throws when a call failed, with the error's code and message; frees the error either way.
// `raw` is taken by reference so that it is read after the call that sets it, whatever order
// the compiler evaluates `check(coinorder_xxx(..., &err), err)`'s arguments in.
void check(coinorder_status status, coinorder_error *&raw) {
    Error err(raw);
    raw = nullptr;
    if (status == COINORDER_OK) return;
    const char *code = coinorder_error_code(err.get());
    const char *message = coinorder_error_message(err.get());
    throw std::runtime_error(std::string(code ? code : "?") + ": " + (message ? message : "?") +
                             " (status " + std::to_string(status) + ")");
}

struct Response {
    std::uint16_t status;
    std::string body;
};

// One HTTP request through the library: method, path, x-api-key header, body.
Response request(const Service &svc, const char *method, const std::string &path, const std::string &key,
                 const std::string &body = "") {
    const std::string headers = "{\"x-api-key\":\"" + key + "\",\"content-type\":\"application/json\"}";
    std::uint16_t status = 0;
    char *out = nullptr;
    coinorder_error *err = nullptr;
    check(coinorder_handle(svc.get(), method, path.c_str(), headers.c_str(),
                           reinterpret_cast<const std::uint8_t *>(body.data()), body.size(), &status, &out, &err),
          err);
    String owned(out);
    return {status, owned.get()};
}

// The string value of "name" in flat JSON text (a real host would use its JSON library).
std::string json_str(const std::string &json, const std::string &name) {
    const std::string pattern = "\"" + name + "\":\"";
    const auto start = json.find(pattern);
    if (start == std::string::npos) return "";
    const auto from = start + pattern.size();
    return json.substr(from, json.find('"', from) - from);
}

}  // namespace

int main(int argc, char **argv) try {
    const char *db = argc > 1 ? argv[1] : "quickstart-cpp.db";
    coinorder_service *raw = nullptr;
    coinorder_error *err = nullptr;
    check(coinorder_service_open(db, nullptr, &raw, &err), err);
    const Service svc(raw);

    char *key_json = nullptr;
    check(coinorder_key_create(svc.get(), "{\"user_id\":1,\"webhook_url\":null}", &key_json, &err), err);
    const std::string key = json_str(String(key_json).get(), "key");

    const Response created = request(svc, "POST", "/v1/orders", key,
                                     R"({"currency":"USD","amount":19.99,"title":"Two coffees"})");
    const std::string id = json_str(created.body, "order_id");
    std::cout << "POST /v1/orders -> " << created.status << " order " << id << '\n';

    const std::string path = "/v1/orders/" + id;
    const Response before = request(svc, "GET", path, key);
    std::cout << "GET " << path << " -> " << before.status << ' ' << json_str(before.body, "status") << '\n';
    const Response paid = request(svc, "POST", path + "/simulate", key, R"({"action":"pay"})");
    std::cout << "POST " << path << "/simulate pay -> " << paid.status << '\n';
    const Response got = request(svc, "GET", path, key);
    const std::string status = json_str(got.body, "status");
    std::cout << "GET " << path << " -> " << got.status << ' ' << status << '\n';

    char *report = nullptr;
    check(coinorder_deliver_due(svc.get(), 100, &report, &err), err);
    std::cout << "webhooks: " << String(report).get() << '\n';
    return status == "PAID" ? 0 : 1;
} catch (const std::exception &e) {
    std::cerr << "error: " << e.what() << '\n';
    return 1;
}
