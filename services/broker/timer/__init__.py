"""Timer messages: RocketMQ 5's TimerMessageStore (rmq_sys_wheel_timer, timerwheel, timerlog, timercheck)."""
