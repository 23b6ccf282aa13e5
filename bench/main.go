package main

import (
	_ "github.com/go-co-op/gocron/v2"
	_ "github.com/hibiken/asynq"
	_ "github.com/onetick/onetick"
	_ "github.com/onetick/onetick/redis"
	_ "github.com/redis/go-redis/v9"
)

func main() {}
