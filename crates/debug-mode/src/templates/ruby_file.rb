# region agent log
require "json"

AGENT_DEBUG_APPEND_PATH = "__APPEND_PATH__" unless defined?(AGENT_DEBUG_APPEND_PATH)
AGENT_DEBUG_SECRET = /pass(word|wd|phrase)|secret|token|api.?key|authorization|cookie|private.?key|credential/i unless defined?(AGENT_DEBUG_SECRET)

def agent_debug_sanitize(value, depth = 0)
  return "[depth limit]" if depth > 8

  case value
  when nil, true, false, Integer then value
  when Float then value.finite? ? value : value.to_s
  when String then value.length > 2000 ? "#{value[0, 2000]}…" : value
  when Symbol then value.to_s
  when Hash
    value.first(100).to_h do |k, v|
      [k.to_s, AGENT_DEBUG_SECRET.match?(k.to_s) ? "[REDACTED]" : agent_debug_sanitize(v, depth + 1)]
    end
  when Array, Set then value.first(100).map { |v| agent_debug_sanitize(v, depth + 1) }
  else agent_debug_sanitize(value.inspect, depth + 1)
  end
end

def agent_debug_log(hypothesis_id, location, message, data = nil)
  line = JSON.generate(
    "hypothesisId" => hypothesis_id,
    "location" => location,
    "message" => message,
    "data" => agent_debug_sanitize(data),
    "timestamp" => (Time.now.to_f * 1000).to_i
  )
  File.open(AGENT_DEBUG_APPEND_PATH, "a") { |f| f.write("#{line}\n") }
rescue StandardError
  nil # A failed observation must never change control flow.
end
# endregion
