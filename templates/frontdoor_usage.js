// The front door's token counter (njs, js_body_filter on /v1/ in templates/frontdoor_key_check.conf.j2):
// nginx cannot read a response body into a log variable by itself, so this filter passes every
// chunk on unchanged, first, and then looks for the response's `usage` object:
//   non-streamed:  {..., "usage": {"prompt_tokens": 5, "total_tokens": 8, "completion_tokens": 3, ...}}
//   streamed, when the client asked stream_options.include_usage: a last event
//                  data: {..., "choices": [], "usage": {"prompt_tokens": ..., ...}}
// (every other event then carries "usage": null, which does not match below). The last complete
// match wins; the counts land in js_var variables the access log writes (tpudeploy/frontdoor_log.py).
//
// Nothing of the body is logged or kept past the request: the last TAIL characters are held in
// $usage_tail only so that a usage object cut between two chunks is still found whole. A prompt
// or completion cannot fake a count: inside a JSON string a quote is escaped (\"usage\":), so
// `"usage":{` matches only an object's own key.
//
// Runs on njs 0.7.9 (Debian bookworm's libnginx-mod-http-js, the tests) and the official image's
// newer njs: ES5 plus `export default`, Buffer.toString, r.sendBuffer, r.variables.
var TAIL = 1024;
var USAGE = /"usage":\s*\{((?:[^{}]|\{[^{}]*\})*)\}/g;
var PROMPT = /"prompt_tokens":\s*(\d+)\s*[,}]/;
var COMPLETION = /"completion_tokens":\s*(\d+)\s*[,}]/;

function count(r, data, flags) {
    // The client's bytes first, exactly as they came (buffer_type=buffer: no re-encoding of a
    // multi-byte character split between chunks).
    r.sendBuffer(data, flags);
    try {
        var text = r.variables.usage_tail + data.toString();
        var match, last = null;
        USAGE.lastIndex = 0;
        while ((match = USAGE.exec(text)) !== null) {
            last = match[1] + '}';
        }
        if (last !== null) {
            var prompt = PROMPT.exec(last);
            var completion = COMPLETION.exec(last);
            if (prompt && completion) {
                r.variables.usage_prompt_tokens = prompt[1];
                r.variables.usage_completion_tokens = completion[1];
            }
        }
        r.variables.usage_tail = flags.last ? '' : text.slice(-TAIL);
    } catch (e) {
        // A count is never worth a broken response: the request is logged without it.
        r.variables.usage_tail = '';
    }
}

export default {count};
