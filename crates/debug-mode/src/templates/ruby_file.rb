# region agent log
require "json"

AGENT_DEBUG_APPEND_PATH = "__APPEND_PATH__" unless defined?(AGENT_DEBUG_APPEND_PATH)
# Secret key names, compared without case and separators: a short secret word as the whole
# name, or a name ending with a secret word (api_key, accessToken; not tokenCount).
AGENT_DEBUG_SECRET = /\A(?:pwd|auth|sid|jwt|otp|pin)\z|(?:password|passwd|passphrase|secret|token|apikey|authorization|cookies?|privatekey|accesskey|credentials?|signature|sessionid)\z/ unless defined?(AGENT_DEBUG_SECRET)

def agent_debug_sanitize(value, depth = 0, active = {}.compare_by_identity)
  return "[depth limit]" if depth > 8

  case value
  when nil, true, false, Integer then value
  when Float then value.finite? ? value : value.to_s
  when String then value.length > 2000 ? "#{value[0, 2000]}…" : value
  when Symbol then value.to_s
  when Hash, Array, Set
    # A value that contains itself cannot be recorded: nothing is written.
    raise ArgumentError, "cyclic value" if active.key?(value)

    active[value] = true
    begin
      if value.is_a?(Hash)
        value.first(100).to_h do |k, v|
          secret = AGENT_DEBUG_SECRET.match?(k.to_s.downcase.gsub(/[^a-z0-9]/, ""))
          [k.to_s, secret ? "[REDACTED]" : agent_debug_sanitize(v, depth + 1, active)]
        end
      else
        value.first(100).map { |v| agent_debug_sanitize(v, depth + 1, active) }
      end
    ensure
      active.delete(value)
    end
  else agent_debug_sanitize(value.inspect, depth + 1, active)
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
