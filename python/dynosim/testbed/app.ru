# frozen_string_literal: true
#
# The testbed's Rack app: app.py's protocol, for the real Ruby servers (app.server = "puma" or
# "unicorn"; docs/testbed.md, "Ruby servers"). Puma and Unicorn load it (their config file,
# written by dynosim.testbed.dynos, names it) in every worker of every dyno, after forking.
#
# The request header, the response headers (X-Dynosim-Start ... X-Dynosim-Phase-Wall,
# X-Dynosim-Proc-Cpu), the work log lines, the ready file and the configuration (JSON in
# DYNOSIM_TESTBED) are app.py's; see its docstring. The phases:
#
# - cpu:T computes in Ruby until this thread's CPU time (CLOCK_THREAD_CPUTIME_ID) has grown by
#   T, so the GVL, the other threads and the pinned cores stretch it;
# - io:T and hold:T sleep (Kernel#sleep, which releases the GVL);
# - use=R:T takes a PG::Connection from resource R's pool for this process (a Queue, opened
#   on first use, kept; waiters served first come, first served) and runs SELECT pg_sleep(T),
#   or in burn mode SELECT dynosim_burn(N) (the pg gem waits for the answer without the GVL);
# - mem:B allocates B bytes as Ruby strings of 1 to 32 KiB (random sizes, every byte written),
#   held until the last phase; keep:F keeps a share F of them past the request in a
#   per-process cache of at most 1024 pieces (a random one dropped to make room).
#
# Faults ([[faults]]: slowdowns and outages) as app.py runs them, from the same file (its
# windows in wall-clock time, read again whenever it changes): a phase beginning in a
# slowdown's window takes `factor` times its drawn time, an outage refuses (500 with
# X-Dynosim-Outage) or holds (hang) the request a thread takes in it, or the query beginning in it.
#
# app.wait_timeout and app.service_timeout are Rack::Timeout's own (Debian's ruby-rack-timeout,
# zombocom/rack-timeout), its middleware in front of the app with either set (the other off):
# wait_timeout drops a request older than it by its X-Request-Start when a thread takes it
# (RequestExpiryError), which the testbed answers 503 with X-Dynosim-Expired, as app.py does;
# service_timeout raises inside the request's thread once it has had the request that long
# (RequestTimeoutException, then RequestTimeoutError), interrupting its phase, and the
# testbed answers 500 with X-Dynosim-Service-Timeout, as app.py does. service_past_wait is
# on, so that the service timeout is service_timeout whatever the request waited, as in the
# simulation (Rack::Timeout's default shortens it to what wait_timeout leaves). A query in
# flight is interrupted in the app, its connection closed (the pool opens another); PostgreSQL
# runs the statement on to its end, as the simulation's resource does. Rack::Timeout reads the header as
# Heroku's router writes it (milliseconds since the epoch); HAProxy's stamp is t=<microseconds>
# (New Relic's form, which Rack::Timeout does not read), so it gets Heroku's form, the original
# kept for the app's own echo and work log.
#
# Only Ruby's standard library, pg (only with a resource), rack-timeout (only with
# app.wait_timeout or app.service_timeout) and Rack's calling convention.

require "json"
require "etc"

module DynosimTestbed
  CONFIG = JSON.parse(ENV.fetch("DYNOSIM_TESTBED", "{}"))
  DYNO = (CONFIG["dyno"] || 0).to_s
  PAGE = Etc.sysconf(Etc::SC_PAGE_SIZE)
  KINDS = %w[cpu io hold use mem keep].freeze
  MAX_ALLOC = 256 * 1024 * 1024
  PIECE_MIN = 1024
  PIECE_MAX = 32 * 1024
  KEPT_MAX = 1024
  ZERO = "\0".b.freeze

  # "cpu:0.01,use=db:0.02" => [["cpu", "", 0.01], ["use", "db", 0.02]]; ArgumentError otherwise.
  def self.parse_phases(text)
    text.split(",").map(&:strip).reject(&:empty?).map do |item|
      cut = item.rindex(":")
      kind = cut ? item[0...cut] : ""
      seconds = cut ? item[(cut + 1)..] : item
      resource = ""
      if kind.start_with?("use=")
        kind, resource = "use", kind[4..]
      end
      raise ArgumentError, "unknown phase #{item.inspect}" if !KINDS.include?(kind) || (kind == "use" && resource.empty?)
      value = Float(seconds, exception: false)
      raise ArgumentError, "phase #{item.inspect}: the time must be a number >= 0" unless value && value >= 0
      if kind == "mem" && !(value == value.floor && value <= MAX_ALLOC)
        raise ArgumentError, "phase #{item.inspect}: the size must be whole bytes, at most #{MAX_ALLOC}"
      end
      raise ArgumentError, "phase #{item.inspect}: the share kept must be between 0 and 1" if kind == "keep" && value > 1
      [kind, resource, value]
    end
  end

  def self.thread_cpu
    Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
  end

  # Computes until this thread has used `seconds` of CPU time.
  def self.burn_cpu(seconds)
    stop = thread_cpu + seconds
    x = 0
    while thread_cpu < stop
      i = 0
      while i < 256
        x ^= i
        i += 1
      end
    end
    x
  end

  # A resource's connections in this process: at most `size` open at once (nil: as many as
  # requests need), handed out first come, first served, kept open between requests.
  class Pool
    attr_reader :lock

    def initialize(dsn, size, statement_timeout = nil)
      @dsn = dsn
      @size = size
      @statement_timeout = statement_timeout
      @idle = Queue.new
      @opened = 0
      @lock = Mutex.new
    end

    def take
      begin
        return @idle.pop(true)
      rescue ThreadError # empty
      end
      grow = @lock.synchronize { (@size.nil? || @opened < @size) && (@opened += 1) }
      return @idle.pop unless grow
      begin
        require "pg" # only apps with a resource need it
        conn = PG.connect(@dsn)
        # [resources.NAME] timeout: PostgreSQL stops a statement on this connection after it.
        conn.exec("SET statement_timeout = #{[1, (@statement_timeout * 1000).round].max}") if @statement_timeout
        conn
      rescue Exception
        @lock.synchronize { @opened -= 1 }
        raise
      end
    end

    def give(conn)
      @idle << conn
    end

    def forget
      @lock.synchronize { @opened -= 1 }
    end
  end

  # The last try of a query ran into its resource's statement_timeout: the app answers 500.
  class ResourceTimeout < StandardError; end

  class Resource
    def initialize(name, dsn, spec)
      @name = name
      @pool = Pool.new(dsn, spec["pool"], spec["timeout"])
      @mode = spec.fetch("mode", "sleep")
      @burn_rate = Float(spec.fetch("burn_rate", 0.0))
      @retries = Integer(spec.fetch("retries", 0))
    end

    # One statement: `held` seconds of an outage that hangs (the database holding the query,
    # in its statement_timeout's clock), then the query's own work.
    def query(conn, seconds, held)
      if @mode == "burn"
        units = [(seconds * @burn_rate).round(half: :even), 1].max
        if held > 0
          conn.exec_params("SELECT pg_sleep($1), dynosim_burn($2)", [held, units])
        else
          conn.exec_params("SELECT dynosim_burn($1)", [units])
        end
      else
        conn.exec_params("SELECT pg_sleep($1)", [held + seconds])
      end
    end

    # Runs one query holding a connection, trying it again at once after a refusal or its
    # statement_timeout, up to `retries` times (each retry appended to `tried`); returns the
    # time spent waiting for the connection (app.py's Resource.use).
    def use(seconds, tried = nil)
      asked = Time.now.to_f
      conn = @pool.take
      waited = Time.now.to_f - asked
      begin
        (0..@retries).each do |attempt|
          tried << 1 if attempt.positive? && tried
          begin
            held = FAULTS_FILE ? DynosimTestbed.gate(@name, hold: true) : 0.0
            query(conn, seconds * (FAULTS_FILE ? DynosimTestbed.factor(@name, Time.now.to_f) : 1.0), held)
            break
          rescue Outage
            raise if attempt == @retries
          rescue PG::QueryCanceled
            raise ResourceTimeout, @name if attempt == @retries
          end
        end
      rescue Outage, ResourceTimeout
        @pool.give(conn) # the session goes on after a refusal or a cancelled statement
        raise
      rescue Exception
        conn.close rescue nil # a broken connection is not given back
        @pool.forget
        raise
      end
      @pool.give(conn)
      waited
    end
  end

  RESOURCES = (CONFIG["resources"] || {}).to_h { |name, spec| [name, Resource.new(name, CONFIG.fetch("dsn", ""), spec)] }
  KEPT = []
  KEPT_LOCK = Mutex.new
  LOG_LOCK = Mutex.new
  @log = nil
  @log_pid = nil

  # This worker's work log (see app.py): opened by the process that writes to it, so a worker
  # forked after loading the app still writes a file of its own.
  def self.note(mark, request, time)
    dir = CONFIG["work_dir"]
    return if dir.nil? || request.empty?
    log = LOG_LOCK.synchronize do
      if @log_pid != Process.pid
        @log = File.open(File.join(dir, "#{DYNO}-#{Process.pid}.log"), File::WRONLY | File::CREAT | File::APPEND, 0o600)
        @log_pid = Process.pid
      end
      @log
    end
    log.syswrite(format("%s %s %.6f\n", mark, request, time)) # one write(2), unbuffered
  end

  def self.request_start(text)
    return nil unless text.start_with?("t=")
    micro = Integer(text[2..], 10, exception: false)
    micro && micro / 1e6
  end

  def self.allocate(size)
    pieces = []
    left = size
    while left > 0
      piece = [left, rand(PIECE_MIN..PIECE_MAX)].min
      pieces << ZERO * piece # written, so resident
      left -= piece
    end
    pieces
  end

  def self.keep(pieces, share)
    pieces.each do |piece|
      next unless rand < share
      KEPT_LOCK.synchronize do
        if KEPT.size >= KEPT_MAX
          KEPT[rand(KEPT.size)] = piece
        else
          KEPT << piece
        end
      end
    end
  end

  def self.rss
    File.read("/proc/self/statm").split[1].to_i * PAGE
  end

  def self.monotonic
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  FAULTS_FILE = CONFIG["faults_file"]
  FAULTS_LOCK = Mutex.new
  @faults = []
  @faults_read = nil

  # The faults' windows (app.py's slowdowns()), read again when the file changed.
  def self.faults
    return @faults unless FAULTS_FILE
    stamp = begin
      File.stat(FAULTS_FILE).mtime
    rescue SystemCallError
      return @faults
    end
    FAULTS_LOCK.synchronize do
      if stamp != @faults_read
        begin
          @faults = JSON.parse(File.read(FAULTS_FILE))
          @faults_read = stamp
        rescue SystemCallError, JSON::ParserError
          # being written: the next phase reads it
        end
      end
      @faults
    end
  end

  def self.inside?(window, target, now)
    window["target"] == target && window["from"] <= now && now < window["until"]
  end

  # What a phase of `target` ("app" or a resource) beginning at `now` takes its drawn time times.
  def self.factor(target, now)
    faults.reduce(1.0) do |out, w|
      w.fetch("kind", "slowdown") == "slowdown" && inside?(w, target, now) ? out * Float(w["factor"]) : out
    end
  end

  # An outage refused the request (or its query): the app answers 500.
  class Outage < StandardError; end

  # What an outage of `target` does to work that begins now: raises Outage (it refuses), or
  # waits until its end (it hangs), as often as outages follow one another. `hold`: a
  # resource's query, which the database holds instead: returns how long, without waiting.
  def self.gate(target, hold: false)
    held = 0.0
    loop do
      now = Time.now.to_f + held
      hit = faults.find { |w| %w[refuse hang].include?(w["kind"]) && inside?(w, target, now) }
      return held if hit.nil?
      raise Outage, target if hit["kind"] == "refuse"
      if hold
        held += [0.0, Float(hit["until"]) - now].max
      else
        sleep([0.0, Float(hit["until"]) - now].max)
      end
    end
  end

  # Does the phases; returns [CPU seconds this thread used, seconds waited for pools]. `walls`,
  # when given, gets each phase's wall time appended, in order.
  def self.perform(phases, walls = nil, tried = nil)
    cpu0 = thread_cpu
    pool_wait = 0.0
    held = []
    share = 0.0
    phases.each do |kind, resource, seconds|
      began = monotonic
      # A resource's outages and slowdowns are each try's (Resource#use).
      seconds *= factor("app", Time.now.to_f) if FAULTS_FILE && %w[cpu io hold].include?(kind)
      case kind
      when "cpu" then burn_cpu(seconds)
      when "use"
        raise ArgumentError, "no resource #{resource.inspect} in this testbed" unless RESOURCES.key?(resource)
        pool_wait += RESOURCES[resource].use(seconds, tried)
      when "mem" then held.concat(allocate(seconds.to_i))
      when "keep" then share = seconds
      else sleep(seconds)
      end
      walls << monotonic - began if walls
    end
    keep(held, share) if share > 0
    held = nil # the rest is garbage from here
    [thread_cpu - cpu0, pool_wait]
  end

  def self.call(env)
    start = Time.now.to_f
    begin
      phases = parse_phases(env.fetch("HTTP_X_DYNOSIM_PHASES", ""))
    rescue ArgumentError => e
      return [400, { "Content-Type" => "text/plain" }, ["#{e.message}\n"]]
    end
    request = env.fetch("HTTP_X_DYNOSIM_ID", "")
    stamp = env.key?(STAMP) ? env[STAMP].to_s : env.fetch("HTTP_X_REQUEST_START", "")
    stamped = request_start(stamp)
    note("q", request, stamped) if stamped
    note("s", request, start)
    walls = []
    tried = []
    begin
      gate("app") if FAULTS_FILE
      cpu, pool_wait = perform(phases, walls, tried)
    rescue Outage, ResourceTimeout => e
      note("e", request, Time.now.to_f)
      mark = e.is_a?(Outage) ? "X-Dynosim-Outage" : "X-Dynosim-Resource-Timeout"
      return [500, { "Content-Type" => "text/plain", mark => "1", "X-Dynosim-App-Retries" => tried.size.to_s,
                     "X-Dynosim-Dyno" => DYNO }, [e.is_a?(Outage) ? "outage\n" : "resource timeout\n"]]
    rescue Exception => e # rubocop:disable Lint/RescueException: Rack::Timeout's, raised in this thread
      # app.service_timeout: the request's work ends here; Expiry answers it.
      note("e", request, Time.now.to_f) if e.class.name == "Rack::Timeout::RequestTimeoutException"
      raise
    end
    finish = Time.now.to_f
    note("e", request, finish)
    headers = {
      "Content-Type" => "text/plain",
      "X-Dynosim-Start" => format("%.6f", start),
      "X-Dynosim-End" => format("%.6f", finish),
      "X-Dynosim-Dyno" => DYNO,
      "X-Dynosim-Pid" => Process.pid.to_s,
      "X-Dynosim-Rss" => rss.to_s,
      "X-Dynosim-Cpu" => format("%.6f", cpu),
      "X-Dynosim-Pool-Wait" => format("%.6f", pool_wait),
      "X-Dynosim-Request-Start" => stamp,
      "X-Dynosim-App-Retries" => tried.size.to_s,
      "X-Dynosim-Phase-Wall" => walls.map { |w| format("%.6f", w) }.join(","),
    }
    # Last, so that everything this process did for the request up to here is in it: the
    # process's CPU (user + system, every thread), as app.py's time.process_time().
    headers["X-Dynosim-Proc-Cpu"] = format("%.6f", Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID))
    [200, headers, ["ok\n"]]
  end

  # The router's X-Request-Start as it came (HAProxy's t=<microseconds>), where Expiry keeps it.
  STAMP = "dynosim.x_request_start"

  # app.wait_timeout and app.service_timeout: Rack::Timeout in front of the app (see the top of
  # this file); nil: that one off.
  class Expiry
    def initialize(app, wait_timeout, service_timeout)
      require "rack-timeout"
      Rack::Timeout::Logger.disable # a line per request otherwise
      @timeout = Rack::Timeout.new(app, service_timeout: service_timeout || false, wait_timeout: wait_timeout || false,
                                        wait_overtime: false, service_past_wait: true)
    end

    def call(env)
      stamp = env["HTTP_X_REQUEST_START"]
      env[STAMP] = stamp
      micro = stamp && stamp.start_with?("t=") && Integer(stamp[2..], 10, exception: false)
      env["HTTP_X_REQUEST_START"] = (micro / 1000).to_s if micro # Heroku's form: milliseconds
      @timeout.call(env)
    rescue Rack::Timeout::RequestExpiryError
      [503, { "Content-Type" => "text/plain", "X-Dynosim-Expired" => "1", "X-Dynosim-Dyno" => DYNO }, ["expired\n"]]
    rescue Rack::Timeout::RequestTimeoutError, Rack::Timeout::RequestTimeoutException
      [500, { "Content-Type" => "text/plain", "X-Dynosim-Service-Timeout" => "1", "X-Dynosim-Dyno" => DYNO },
       ["service timeout\n"]]
    end
  end

  # Tells the testbed this worker has loaded the app: a file named dyno-pid in ready_dir.
  def self.ready
    dir = CONFIG["ready_dir"]
    File.write(File.join(dir, "#{DYNO}-#{Process.pid}"), "") if dir
  end
end

wait_timeout = DynosimTestbed::CONFIG["wait_timeout"]
service_timeout = DynosimTestbed::CONFIG["service_timeout"]
app = if wait_timeout || service_timeout
        DynosimTestbed::Expiry.new(DynosimTestbed, wait_timeout && Float(wait_timeout),
                                   service_timeout && Float(service_timeout))
      else
        DynosimTestbed
      end
DynosimTestbed.ready # once the app, and Rack::Timeout with it, has loaded
run app
