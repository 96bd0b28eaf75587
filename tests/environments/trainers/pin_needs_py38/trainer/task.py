print("this trainer must never start")
