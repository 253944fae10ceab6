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
# Only Ruby's standard library, pg (only with a resource) and Rack's calling convention.

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

    def initialize(dsn, size)
      @dsn = dsn
      @size = size
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
        PG.connect(@dsn)
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

  class Resource
    def initialize(dsn, spec)
      @pool = Pool.new(dsn, spec["pool"])
      @mode = spec.fetch("mode", "sleep")
      @burn_rate = Float(spec.fetch("burn_rate", 0.0))
    end

    # Runs one query holding a connection; returns the time spent waiting for it.
    def use(seconds)
      asked = Time.now.to_f
      conn = @pool.take
      waited = Time.now.to_f - asked
      begin
        if @mode == "burn"
          conn.exec_params("SELECT dynosim_burn($1)", [[(seconds * @burn_rate).round(half: :even), 1].max])
        else
          conn.exec_params("SELECT pg_sleep($1)", [seconds])
        end
      rescue Exception
        conn.close rescue nil # a broken connection is not given back
        @pool.forget
        raise
      end
      @pool.give(conn)
      waited
    end
  end

  RESOURCES = (CONFIG["resources"] || {}).to_h { |name, spec| [name, Resource.new(CONFIG.fetch("dsn", ""), spec)] }
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

  # Does the phases; returns [CPU seconds this thread used, seconds waited for pools]. `walls`,
  # when given, gets each phase's wall time appended, in order.
  def self.perform(phases, walls = nil)
    cpu0 = thread_cpu
    pool_wait = 0.0
    held = []
    share = 0.0
    phases.each do |kind, resource, seconds|
      began = monotonic
      case kind
      when "cpu" then burn_cpu(seconds)
      when "use"
        raise ArgumentError, "no resource #{resource.inspect} in this testbed" unless RESOURCES.key?(resource)
        pool_wait += RESOURCES[resource].use(seconds)
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
    stamped = request_start(env.fetch("HTTP_X_REQUEST_START", ""))
    note("q", request, stamped) if stamped
    note("s", request, start)
    walls = []
    cpu, pool_wait = perform(phases, walls)
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
      "X-Dynosim-Request-Start" => env.fetch("HTTP_X_REQUEST_START", ""),
      "X-Dynosim-Phase-Wall" => walls.map { |w| format("%.6f", w) }.join(","),
    }
    # Last, so that everything this process did for the request up to here is in it: the
    # process's CPU (user + system, every thread), as app.py's time.process_time().
    headers["X-Dynosim-Proc-Cpu"] = format("%.6f", Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID))
    [200, headers, ["ok\n"]]
  end

  # Tells the testbed this worker has loaded the app: a file named dyno-pid in ready_dir.
  def self.ready
    dir = CONFIG["ready_dir"]
    File.write(File.join(dir, "#{DYNO}-#{Process.pid}"), "") if dir
  end
end

DynosimTestbed.ready
run DynosimTestbed
